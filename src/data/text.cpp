// Text source: strict UTF-8 decoding (RFC 3629), char/byte vocabularies with JSON round trip,
// and next-token windows.
#include "data/text.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"

namespace seqtrain {

std::u32string decode_utf8(std::string_view s, const std::string& where) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  if (s.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // BOM: not content
  const auto bad = [&](size_t at, const char* why) {
    fail("{}: invalid UTF-8 at byte {}: {} (byte 0x{:02X}); re-encode the file as UTF-8 (e.g. iconv -f latin1 -t "
         "utf-8) or use data.vocab: byte", where, at, why, static_cast<unsigned char>(s[at]));
  };
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) { out.push_back(b0); ++i; continue; }
    int len;
    char32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) { len = 2; cp = b0 & 0x1F; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) { len = 3; cp = b0 & 0x0F; }
    else if (b0 >= 0xF0 && b0 <= 0xF4) { len = 4; cp = b0 & 0x07; }
    else if (b0 >= 0x80 && b0 <= 0xBF) bad(i, "a continuation byte where a character should start");
    else bad(i, "a byte that never occurs in UTF-8");
    if (i + static_cast<size_t>(len) > s.size()) bad(i, "a character cut off by the end of the file");
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      // Report where the broken character starts: for latin-1 text that is the accented letter.
      if ((b & 0xC0) != 0x80) bad(i, "a multi-byte character whose continuation bytes are missing");
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) bad(i, "an overlong encoding");
    if (cp >= 0xD800 && cp <= 0xDFFF) bad(i, "an encoded UTF-16 surrogate");
    if (cp > 0x10FFFF) bad(i, "a code point above U+10FFFF");
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

const char* vocab_kind_name(VocabKind k) { return k == VocabKind::Char ? "char" : "byte"; }

VocabKind parse_vocab_kind(const std::string& s, const std::string& key) {
  if (s == "char") return VocabKind::Char;
  if (s == "byte") return VocabKind::Byte;
  fail("{}: unknown vocabulary '{}'; use char (one id per Unicode character) or byte (256 ids)", key, s);
}

Vocab Vocab::bytes() { return Vocab(); }

Vocab Vocab::chars(std::u32string_view text) {
  Vocab v;
  v.kind_ = VocabKind::Char;
  std::set<char32_t> seen(text.begin(), text.end());
  v.symbols_.assign(seen.begin(), seen.end());
  for (size_t k = 0; k < v.symbols_.size(); ++k) v.ids_[v.symbols_[k]] = static_cast<int32_t>(k + 1);
  return v;
}

int32_t Vocab::id_of(char32_t c) const {
  if (kind_ == VocabKind::Byte) return c < 256 ? static_cast<int32_t>(c) : kUnk;
  auto it = ids_.find(c);
  return it == ids_.end() ? kUnk : it->second;
}

std::vector<int32_t> Vocab::encode(std::string_view text, const std::string& where, int64_t* unknown) const {
  std::vector<int32_t> ids;
  int64_t unk = 0;
  if (kind_ == VocabKind::Byte) {
    ids.reserve(text.size());
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  } else {
    const std::u32string cps = decode_utf8(text, where);
    ids.reserve(cps.size());
    for (char32_t c : cps) {
      const int32_t id = id_of(c);
      unk += id == kUnk;
      ids.push_back(id);
    }
  }
  if (unknown) *unknown = unk;
  return ids;
}

std::string Vocab::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    ST_CHECK(0 <= id && id < size(), "token id {} is outside the {} vocabulary of {} ids (does the model match the "
             "vocabulary?)", id, vocab_kind_name(kind_), size());
    if (kind_ == VocabKind::Byte) out.push_back(static_cast<char>(id));
    else append_utf8(id == kUnk ? U'\uFFFD' : symbols_[static_cast<size_t>(id - 1)], out);
  }
  return out;
}

nlohmann::json Vocab::to_json() const {
  nlohmann::json j;
  j["format"] = "seqtrain.vocab";
  j["version"] = 1;
  j["kind"] = vocab_kind_name(kind_);
  j["size"] = size();
  if (kind_ == VocabKind::Char) {
    j["unk_id"] = kUnk;
    // Code points as numbers: unambiguous for whitespace and control characters, and the
    // readable form alongside for people.
    std::vector<uint32_t> cps(symbols_.begin(), symbols_.end());
    j["code_points"] = cps;
    std::string text;
    for (char32_t c : symbols_) append_utf8(c, text);
    j["text"] = text;
  }
  return j;
}

Vocab Vocab::from_json(const nlohmann::json& j, const std::string& where) {
  try {
    ST_CHECK(j.is_object() && j.value("format", "") == "seqtrain.vocab",
             "{}: not a seqtrain vocabulary (key 'format' must be \"seqtrain.vocab\")", where);
    ST_CHECK(j.value("version", 0) == 1, "{}: key 'version': unsupported vocabulary version {}", where,
             j.value("version", 0));
    const VocabKind kind = parse_vocab_kind(j.at("kind").get<std::string>(), where + ": key 'kind'");
    if (kind == VocabKind::Byte) return bytes();
    ST_CHECK(j.value("unk_id", -1) == kUnk, "{}: key 'unk_id' must be 0", where);
    Vocab v;
    v.kind_ = VocabKind::Char;
    const auto& cps = j.at("code_points");
    ST_CHECK(cps.is_array(), "{}: key 'code_points' must be an array of integers", where);
    for (size_t k = 0; k < cps.size(); ++k) {
      ST_CHECK(cps[k].is_number_unsigned(), "{}: code_points[{}] is not a non-negative integer", where, k);
      const uint64_t c = cps[k].get<uint64_t>();
      ST_CHECK(c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF), "{}: code_points[{}] = {} is not a Unicode scalar "
               "value", where, k, c);
      const auto cp = static_cast<char32_t>(c);
      ST_CHECK(v.ids_.emplace(cp, static_cast<int32_t>(k + 1)).second, "{}: code_points[{}] = {} appears twice",
               where, k, c);
      v.symbols_.push_back(cp);
    }
    ST_CHECK(!j.contains("size") || j["size"] == v.size(), "{}: key 'size' says {} but there are {} ids", where,
             j["size"].dump(), v.size());
    return v;
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed vocabulary: {}", where, e.what());
  }
}

void Vocab::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ST_CHECK(f.good(), "{}: cannot write the vocabulary (check that the directory exists and is writable)", tmp);
    f << to_json().dump(1) << "\n";
    f.flush();
    ST_CHECK(f.good(), "{}: writing the vocabulary failed (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  ST_CHECK(!ec, "{}: cannot rename {} into place: {}", path, tmp, ec.message());
}

Vocab Vocab::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ST_CHECK(f.good(), "{}: cannot open the vocabulary (was the checkpoint saved by a text job?)", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  return from_json(j, path);
}

TextData load_text(const std::string& path, VocabKind kind, const Vocab* vocab) {
  std::ifstream f(path, std::ios::binary);
  ST_CHECK(f.good(), "{}: cannot open the text file (check data.path)", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  TextData d;
  if (vocab) {
    ST_CHECK(vocab->kind() == kind, "{}: the given vocabulary is '{}' but data.vocab is '{}'", path,
             vocab_kind_name(vocab->kind()), vocab_kind_name(kind));
    d.vocab = *vocab;
  } else if (kind == VocabKind::Char) {
    d.vocab = Vocab::chars(decode_utf8(text, path));
  } else {
    d.vocab = Vocab::bytes();
  }
  d.tokens = std::make_shared<const std::vector<int32_t>>(d.vocab.encode(text, path, &d.unknown));
  return d;
}

TextSource::TextSource(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block_size, int64_t stride,
                       int64_t begin, int64_t end, std::string where)
    : tokens_(std::move(tokens)), block_(block_size), stride_(stride == 0 ? block_size : stride), begin_(begin) {
  ST_CHECK(stride_ >= 1, "data.stride must be at least 1, got {}", stride_);
  end_ = checked_token_range(tokens_.get(), block_, begin_, end, "TextSource", where);
  n_ = (end_ - begin_ - block_ - 1) / stride_ + 1;
}

int64_t checked_token_range(const std::vector<int32_t>* tokens, int64_t block, int64_t begin, int64_t end,
                            const char* source, const std::string& where) {
  ST_CHECK(tokens != nullptr, "{}: no tokens", source);
  end = end < 0 ? static_cast<int64_t>(tokens->size()) : end;
  ST_CHECK(block >= 1, "data.block_size must be at least 1, got {}", block);
  ST_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(tokens->size()),
           "{}: token range [{}, {}) outside the {} tokens", source, begin, end, tokens->size());
  ST_CHECK(end - begin >= block + 1,
           "{}: {} tokens, but one sample needs data.block_size + 1 = {} (block_size inputs and the next-token "
           "target); use a longer file or lower data.block_size", where, end - begin, block + 1);
  return end;
}

void TextSource::fill(std::span<const int64_t> idx, int64_t, float* x, float* y) const {
  const int32_t* t = tokens_->data();
  for (size_t b = 0; b < idx.size(); ++b) {
    ST_CHECK(0 <= idx[b] && idx[b] < n_, "text sample {} out of range: there are {}", idx[b], n_);
    const int32_t* w = t + begin_ + idx[b] * stride_;
    for (int64_t k = 0; k < block_; ++k) {
      if (x) x[static_cast<int64_t>(b) * block_ + k] = static_cast<float>(w[k]);
      if (y) y[static_cast<int64_t>(b) * block_ + k] = static_cast<float>(w[k + 1]);
    }
  }
}

void TextSource::fill_ids(int64_t sample, int32_t* x, int32_t* y) const {
  ST_CHECK(0 <= sample && sample < n_, "text sample {} out of range: there are {}", sample, n_);
  const int32_t* w = tokens_->data() + begin_ + sample * stride_;
  if (x) std::copy_n(w, block_, x);
  if (y) std::copy_n(w + 1, block_, y);
}

}  // namespace seqtrain
