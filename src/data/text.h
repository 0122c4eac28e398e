// Text source for character-level language models: a UTF-8 file, a vocabulary, and samples
// that are windows of block_size tokens with the next-token targets.
//
// Vocabularies:
//  - byte: 256 ids, id = byte value. Any file is accepted (no UTF-8 check) and nothing is
//    ever unknown.
//  - char: one id per Unicode code point seen in the training text. Id 0 is reserved for
//    <unk>; the seen code points follow in ascending order from id 1, so the same text
//    always gives the same vocabulary. The file must be valid UTF-8 (strict: no overlong
//    forms, surrogates or values above U+10FFFF); a leading BOM is skipped.
// Unknown characters (at predict/generate time, or in a val file with characters the training
// text lacked) encode to id 0 (<unk>) and are counted; id 0 decodes to U+FFFD.
// The vocabulary is saved as JSON (vocab.json next to the checkpoint's model) so generation
// uses exactly the training ids.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/loader.h"

namespace seqtrain {

// Decodes UTF-8 strictly. Throws Error "WHERE: invalid UTF-8 at byte N: ..." with a fix.
std::u32string decode_utf8(std::string_view s, const std::string& where);
// Encodes a code point (must be a Unicode scalar value) as UTF-8, appending to out.
void append_utf8(char32_t cp, std::string& out);

enum class VocabKind { Char, Byte };
const char* vocab_kind_name(VocabKind k);  // "char" / "byte"
// Parses "char" or "byte"; Error naming `key` otherwise.
VocabKind parse_vocab_kind(const std::string& s, const std::string& key = "data.vocab");

class Vocab {
 public:
  static constexpr int32_t kUnk = 0;  // char vocabularies only

  Vocab() = default;
  static Vocab bytes();
  // The char vocabulary of `text` (already decoded): <unk> + its distinct code points, sorted.
  static Vocab chars(std::u32string_view text);

  VocabKind kind() const { return kind_; }
  int64_t size() const { return kind_ == VocabKind::Byte ? 256 : static_cast<int64_t>(symbols_.size()) + 1; }
  // Id of a code point (char) or byte value (byte); kUnk when a char vocabulary lacks it.
  int32_t id_of(char32_t c) const;

  // Text -> ids. `where` names the source in UTF-8 errors (char only). When `unknown` is given
  // it receives the number of characters mapped to <unk>.
  std::vector<int32_t> encode(std::string_view text, const std::string& where = "<text>",
                              int64_t* unknown = nullptr) const;
  // Ids -> text; Error for an id outside [0, size()).
  std::string decode(std::span<const int32_t> ids) const;

  nlohmann::json to_json() const;
  // `where` names the file for errors (bad kind, duplicate or invalid code points).
  static Vocab from_json(const nlohmann::json& j, const std::string& where);
  void save(const std::string& path) const;  // written to path.tmp, then renamed
  static Vocab load(const std::string& path);

  bool operator==(const Vocab& o) const { return kind_ == o.kind_ && symbols_ == o.symbols_; }

 private:
  VocabKind kind_ = VocabKind::Byte;
  std::vector<char32_t> symbols_;  // char: symbols_[id - 1]
  std::unordered_map<char32_t, int32_t> ids_;
};

struct TextData {
  Vocab vocab;
  std::shared_ptr<const std::vector<int32_t>> tokens;
  int64_t unknown = 0;  // characters mapped to <unk> (only with a given vocabulary)
};
// Reads a whole text file and encodes it. Without `vocab` a fresh one of `kind` is built from
// the file (training); with one, that vocabulary is used (validation, resume).
TextData load_text(const std::string& path, VocabKind kind, const Vocab* vocab = nullptr);

// The checks both text sources make of their token range [begin, end) (end < 0: every token):
// tokens present, block_size >= 1, the range inside the tokens and holding one sample (block_size
// inputs + the next-token target); `source` names the class, `where` the file for the user.
// Returns the resolved end.
int64_t checked_token_range(const std::vector<int32_t>* tokens, int64_t block_size, int64_t begin, int64_t end,
                            const char* source, const std::string& where);

// Samples over tokens [begin, end): sample k has x = tokens[begin + k*stride, ... + block_size)
// and y = the same window one token later (next-token targets), both as floats holding the
// integer ids (exact below 2^24). Throws Error when the range is shorter than block_size + 1.
class TextSource final : public BatchSource {
 public:
  TextSource(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block_size, int64_t stride = 0,
             int64_t begin = 0, int64_t end = -1, std::string where = "<text>");  // stride 0 = block_size
  int64_t size() const override { return n_; }
  int64_t x_size() const override { return block_; }
  int64_t y_size() const override { return block_; }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;
  // The same sample as integer ids (for an embedding lookup without a float round trip).
  void fill_ids(int64_t sample, int32_t* x, int32_t* y) const;

 private:
  std::shared_ptr<const std::vector<int32_t>> tokens_;
  int64_t block_, stride_, begin_, end_, n_ = 0;
};

}  // namespace seqtrain
