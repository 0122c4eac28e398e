#include "backend/cpu/rnn_primitive.h"

#include <cstring>

#include "backend/cpu/dnnl_context.h"
#include "core/error.h"

namespace seqtrain {
namespace {
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using md = dnnl::memory::desc;

WeightLayout layout_of(const md& d) {
  const auto& b = d.data.format_desc.blocking;
  ST_CHECK(d.data.format_kind == dnnl_blocked && b.inner_nblks == 0,
           "oneDNN chose a blocked RNN weight-gradient layout that seqtrain cannot unpack");
  return {b.strides[1], b.strides[2], b.strides[3], d.get_size()};
}

}  // namespace

RnnPrimitive::RnnPrimitive(const RnnShape& s) : shape_(s) {
  const int64_t G = rnn_gates(s.cell), Gb = rnn_bias_gates(s.cell);
  src_md_ = md({s.T, s.N, s.C}, dt::f32, tag::tnc);
  dst_md_ = md({s.T, s.N, s.H * s.D}, dt::f32, tag::tnc);
  wl_md_ = md({1, s.D, s.C, G, s.H}, dt::f32, tag::ldigo);
  wi_md_ = md({1, s.D, s.H, G, s.H}, dt::f32, tag::ldigo);
  wl_bwd_md_ = md({1, s.D, s.C, G, s.H}, dt::f32, tag::ldgoi);
  wi_bwd_md_ = md({1, s.D, s.H, G, s.H}, dt::f32, tag::ldgoi);
  b_md_ = md({1, s.D, s.cell == RnnCell::lstm ? G : Gb, s.H}, dt::f32, tag::ldgo);
  const md none;  // no final state
  // The initial state is zero, but it is passed as explicit zero memory: with a null src_iter,
  // oneDNN 2.6's unidirectional backward computes wrong weight gradients.
  const md iter_md({1, s.D, s.N, s.H}, dt::f32, tag::ldnc);
  iter_md_ = iter_md;
  const md any_wl({1, s.D, s.C, G, s.H}, dt::f32, tag::any), any_wi({1, s.D, s.H, G, s.H}, dt::f32, tag::any);
  const auto dir = s.D == 2 ? dnnl::rnn_direction::bidirectional_concat
                            : dnnl::rnn_direction::unidirectional_left2right;
  const auto prop = s.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  auto& eng = cpu_engine();
  try {
    if (s.cell == RnnCell::lstm) {
      dnnl::lstm_forward::desc fd(prop, dir, src_md_, iter_md, iter_md, wl_md_, wi_md_, b_md_, dst_md_, none, none);
      dnnl::lstm_forward::primitive_desc fpd(fd, eng);
      fwd_ = dnnl::lstm_forward(fpd);
      ws_md_ = fpd.workspace_desc();
      if (s.training) {
        dnnl::lstm_backward::desc bd(dnnl::prop_kind::backward, dir, src_md_, iter_md, iter_md, wl_bwd_md_, wi_bwd_md_, b_md_,
                                     dst_md_, none, none, src_md_, iter_md, iter_md, any_wl, any_wi, b_md_, dst_md_,
                                     none, none);
        dnnl::lstm_backward::primitive_desc bpd(bd, eng, fpd);
        dwl_md_ = bpd.diff_weights_layer_desc();
        dwi_md_ = bpd.diff_weights_iter_desc();
        bwd_ = dnnl::lstm_backward(bpd);
      }
    } else {
      dnnl::lbr_gru_forward::desc fd(prop, dir, src_md_, iter_md, wl_md_, wi_md_, b_md_, dst_md_, none);
      dnnl::lbr_gru_forward::primitive_desc fpd(fd, eng);
      fwd_ = dnnl::lbr_gru_forward(fpd);
      ws_md_ = fpd.workspace_desc();
      if (s.training) {
        dnnl::lbr_gru_backward::desc bd(dnnl::prop_kind::backward, dir, src_md_, iter_md, wl_bwd_md_, wi_bwd_md_, b_md_,
                                        dst_md_, none, src_md_, iter_md, any_wl, any_wi, b_md_, dst_md_, none);
        dnnl::lbr_gru_backward::primitive_desc bpd(bd, eng, fpd);
        dwl_md_ = bpd.diff_weights_layer_desc();
        dwi_md_ = bpd.diff_weights_iter_desc();
        bwd_ = dnnl::lbr_gru_backward(bpd);
      }
    }
  } catch (const dnnl::error& e) {
    fail("oneDNN could not create the {} primitive for T={} N={} C={} H={} D={}: {}",
         s.cell == RnnCell::lstm ? "LSTM" : "GRU", s.T, s.N, s.C, s.H, s.D, e.what());
  }
  auto m = [&](const md& d) { return dnnl::memory(d, eng, nullptr); };
  src_ = m(src_md_); dst_ = m(dst_md_); wl_ = m(wl_md_); wi_ = m(wi_md_); b_ = m(b_md_);
  zeros_.assign(iter_md.get_size() / sizeof(float), 0.f);
  diff_iter_.assign(zeros_.size(), 0.f);
  dnnl::memory z(iter_md, eng, zeros_.data());
  fwd_args_ = {{DNNL_ARG_SRC_ITER, z}, {DNNL_ARG_SRC_LAYER, src_}, {DNNL_ARG_WEIGHTS_LAYER, wl_}, {DNNL_ARG_WEIGHTS_ITER, wi_},
               {DNNL_ARG_BIAS, b_}, {DNNL_ARG_DST_LAYER, dst_}};
  if (s.cell == RnnCell::lstm) fwd_args_.emplace(DNNL_ARG_SRC_ITER_C, z);
  if (s.training) {
    dwl_layout_ = layout_of(dwl_md_);
    dwi_layout_ = layout_of(dwi_md_);
    ws_ = m(ws_md_); ddst_ = m(dst_md_); dsrc_ = m(src_md_); dwl_ = m(dwl_md_); dwi_ = m(dwi_md_); db_ = m(b_md_);
    fwd_args_.emplace(DNNL_ARG_WORKSPACE, ws_);
    wl_bwd_ = m(wl_bwd_md_); wi_bwd_ = m(wi_bwd_md_);
    bwd_args_ = fwd_args_;
    bwd_args_[DNNL_ARG_WEIGHTS_LAYER] = wl_bwd_;
    bwd_args_[DNNL_ARG_WEIGHTS_ITER] = wi_bwd_;
    bwd_args_.insert({{DNNL_ARG_DIFF_DST_LAYER, ddst_}, {DNNL_ARG_DIFF_SRC_LAYER, dsrc_},
                      {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl_}, {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi_},
                      {DNNL_ARG_DIFF_BIAS, db_}});
    dnnl::memory dz(iter_md, eng, diff_iter_.data());
    bwd_args_.emplace(DNNL_ARG_DIFF_SRC_ITER, dz);
    if (s.cell == RnnCell::lstm) bwd_args_.emplace(DNNL_ARG_DIFF_SRC_ITER_C, dz);
  }
}

size_t RnnPrimitive::workspace_bytes() const { return shape_.training ? ws_md_.get_size() : 0; }

void RnnPrimitive::forward(const float* src, const float* w_layer, const float* w_iter, const float* bias,
                           float* dst, void* workspace) {
  src_.set_data_handle(const_cast<float*>(src));
  wl_.set_data_handle(const_cast<float*>(w_layer));
  wi_.set_data_handle(const_cast<float*>(w_iter));
  b_.set_data_handle(const_cast<float*>(bias));
  dst_.set_data_handle(dst);
  if (shape_.training) ws_.set_data_handle(workspace);
  fwd_.execute(cpu_stream(), fwd_args_);
  cpu_stream().wait();
}

void RnnPrimitive::backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                            const float* w_layer, const float* w_iter, const float* bias, float* dw_layer,
                            float* dw_iter, float* dbias, void* workspace) {
  ST_CHECK(bwd_.has_value(), "RNN backward called on an inference-only primitive");
  // oneDNN accumulates into the weight gradients, so they start from zero.
  std::memset(dw_layer, 0, dwl_md_.get_size());
  std::memset(dw_iter, 0, dwi_md_.get_size());
  std::memset(dbias, 0, b_md_.get_size());
  src_.set_data_handle(const_cast<float*>(src));
  wl_bwd_.set_data_handle(const_cast<float*>(w_layer));
  wi_bwd_.set_data_handle(const_cast<float*>(w_iter));
  b_.set_data_handle(const_cast<float*>(bias));
  dst_.set_data_handle(const_cast<float*>(dst));
  ddst_.set_data_handle(const_cast<float*>(diff_dst));
  dsrc_.set_data_handle(diff_src);
  dwl_.set_data_handle(dw_layer);
  dwi_.set_data_handle(dw_iter);
  db_.set_data_handle(dbias);
  ws_.set_data_handle(workspace);
  bwd_->execute(cpu_stream(), bwd_args_);
  cpu_stream().wait();
}

}  // namespace seqtrain
