// What model.encoder_from must have done to a model (train/encoder_from.h), checked tensor by
// tensor: shared by the encoder tests of every family (test_encoder.cpp, test_pretrain_pipeline.cpp,
// test_cnn.cpp).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/encoder.h"
#include "nn/params.h"
#include "test_trainer_util.h"

namespace seqtrain::testing {

// Each tensor of `params`: an encoder tensor holds the source file's values exactly, any other the
// fresh initialisation `fresh` (a model of the same spec from the same seed) has.
inline void expect_encoder_and_fresh_head(ParamStore& params, const SafetensorsFile& source, ParamStore& fresh) {
  std::vector<float> got, want;
  for (const auto& e : params.entries()) {
    got.assign(numel_of(e.shape), 0.f);
    params.read_params(got, e.offset);
    if (is_encoder_tensor(e.name)) {
      want = source.at(e.name).to_f32();
    } else {
      want.assign(got.size(), 0.f);
      fresh.read_params(want, fresh.find(e.name)->offset);
    }
    EXPECT_EQ(got, want) << e.name;
  }
}

// `seqtrain export PRE --encoder ENC` of a masked pretraining run, read back: neither the mask
// token nor the decoder goes with the encoder.
inline SafetensorsFile export_pretrained_encoder(const std::string& pre, const std::string& enc) {
  const cli::Result r = cli::run_seqtrain("export " + pre + " --encoder " + enc);
  EXPECT_EQ(r.rc, 0) << r.out;
  SafetensorsFile f = read_safetensors(enc);
  EXPECT_EQ(f.find("mask_token"), nullptr);
  EXPECT_EQ(f.find("decoder.fc1.weight"), nullptr);
  return f;
}

}  // namespace seqtrain::testing
