// Text source: strict UTF-8 with byte offsets in errors, char vocabulary ids (<unk> = 0, then
// sorted code points), byte vocabulary, unknown characters -> <unk>, JSON save/load round
// trip and its errors, next-token windows, and the file-shorter-than-a-block error.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "data/loader.h"
#include "data/text.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::TempDir;

using testing::error_of;
using testing::write_file;

TEST(DataText, Utf8DecodingAndErrorsWithByteOffsets) {
  // "aé€😀": 1-, 2-, 3- and 4-byte characters; the BOM is skipped.
  EXPECT_EQ(decode_utf8("\xEF\xBB\xBF" "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "t"),
            std::u32string(U"a\u00E9\u20AC\U0001F600"));
  std::string round;
  for (char32_t c : std::u32string(U"a\u00E9\u20AC\U0001F600")) append_utf8(c, round);
  EXPECT_EQ(round, "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  const auto err = [](const std::string& s) { return error_of([&] { decode_utf8(s, "f.txt"); }); };
  std::string e = err("abc\xE9xyz");  // latin-1 é
  EXPECT_CONTAINS(e, "f.txt: invalid UTF-8 at byte 3");
  EXPECT_CONTAINS(e, "0xE9");
  EXPECT_CONTAINS(e, "iconv");
  EXPECT_CONTAINS(err("ab\x80"), "byte 2: a continuation byte");
  EXPECT_CONTAINS(err("ab\xC0\x80"), "byte 2: a byte that never occurs");  // overlong NUL
  EXPECT_CONTAINS(err("\xE0\x80\xAF"), "byte 0: an overlong encoding");
  EXPECT_CONTAINS(err("x\xED\xA0\x80"), "byte 1: an encoded UTF-16 surrogate");
  EXPECT_CONTAINS(err("\xF4\x90\x80\x80"), "above U+10FFFF");
  EXPECT_CONTAINS(err("abcd\xE2\x82"), "byte 4: a character cut off");
  EXPECT_CONTAINS(err("\xE2(x"), "byte 0: a multi-byte character whose continuation bytes are missing");
}

TEST(DataText, CharVocabularyIdsUnknownsAndJsonRoundTrip) {
  TempDir dir;
  const std::string text = "hello, w\u00F6rld\n";
  Vocab v = Vocab::chars(decode_utf8(text, "t"));
  // <unk> + sorted distinct code points: '\n' ' ' ',' 'd' 'e' 'h' 'l' 'o' 'r' 'w' 'ö'
  EXPECT_EQ(v.kind(), VocabKind::Char);
  EXPECT_EQ(v.size(), 12);
  EXPECT_EQ(v.id_of(U'\n'), 1);
  EXPECT_EQ(v.id_of(U'h'), 6);
  EXPECT_EQ(v.id_of(U'\u00F6'), 11);
  EXPECT_EQ(v.id_of(U'z'), Vocab::kUnk);
  auto ids = v.encode(text);
  EXPECT_EQ(v.decode(ids), text);
  // Unknown characters at generate/predict time map to <unk> (0), counted; 0 decodes to U+FFFD.
  int64_t unknown = -1;
  auto ids2 = v.encode("hez\u4E16", "prompt", &unknown);
  EXPECT_EQ(unknown, 2);
  EXPECT_EQ(ids2, (std::vector<int32_t>{6, 5, 0, 0}));
  EXPECT_EQ(v.decode(ids2), "he\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_CONTAINS(error_of([&] { std::vector<int32_t> bad = {12}; v.decode(bad); }),
                  "token id 12 is outside the char vocabulary of 12 ids");

  v.save(dir / "vocab.json");
  EXPECT_FALSE(std::filesystem::exists(dir / "vocab.json.tmp"));
  Vocab w = Vocab::load(dir / "vocab.json");
  EXPECT_TRUE(w == v);
  EXPECT_EQ(w.encode(text), ids);
  Vocab b = Vocab::bytes();
  b.save(dir / "bytes.json");
  EXPECT_TRUE(Vocab::load(dir / "bytes.json") == b);
  EXPECT_FALSE(Vocab::load(dir / "bytes.json") == v);

  // Damaged vocabulary files name the file and the key.
  EXPECT_CONTAINS(error_of([&] { Vocab::load(write_file(dir, "a.json", "{not json")); }), "a.json: not valid JSON");
  EXPECT_CONTAINS(error_of([&] { Vocab::load(write_file(dir, "b.json", R"({"format":"x"})")); }),
                  "b.json: not a seqtrain vocabulary");
  EXPECT_CONTAINS(error_of([&] {
                    Vocab::load(write_file(dir, "c.json", R"({"format":"seqtrain.vocab","version":1,"kind":"char",
                                           "unk_id":0,"code_points":[97,98,97]})"));
                  }),
                  "c.json: code_points[2] = 97 appears twice");
  EXPECT_CONTAINS(error_of([&] {
                    Vocab::load(write_file(dir, "d.json", R"({"format":"seqtrain.vocab","version":1,"kind":"word"})"));
                  }),
                  "unknown vocabulary 'word'");
  EXPECT_CONTAINS(error_of([&] { Vocab::load(dir / "none.json"); }), "none.json: cannot open");
}

TEST(DataText, ByteVocabularyTakesAnyBytes) {
  Vocab b = Vocab::bytes();
  EXPECT_EQ(b.size(), 256);
  const std::string raw = std::string("a\xE9\x00\xFF", 4);  // not UTF-8: fine for bytes
  auto ids = b.encode(raw);
  EXPECT_EQ(ids, (std::vector<int32_t>{97, 0xE9, 0, 0xFF}));
  EXPECT_EQ(b.decode(ids), raw);
  EXPECT_EQ(parse_vocab_kind("byte"), VocabKind::Byte);
  EXPECT_CONTAINS(error_of([] { parse_vocab_kind("bpe"); }), "data.vocab: unknown vocabulary 'bpe'");
}

TEST(DataText, NextTokenWindowsAndShortFile) {
  TempDir dir;
  const std::string path = write_file(dir, "t.txt", "abcdefghij");  // 10 tokens
  TextData d = load_text(path, VocabKind::Char);
  ASSERT_EQ(d.tokens->size(), 10u);
  EXPECT_EQ(d.vocab.size(), 11);
  TextSource s(d.tokens, 4, 2, 0, -1, path);  // starts 0, 2, 4 (4 + 4 + 1 <= 10); 6 would need 11
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(s.x_size(), 4);
  std::vector<int64_t> idx = {2, 0};
  std::vector<float> x(8), y(8);
  s.fill(idx, 0, x.data(), y.data());
  // 'a' is id 1, so the letter at position p has id p + 1.
  EXPECT_EQ(x, (std::vector<float>{5, 6, 7, 8, 1, 2, 3, 4}));
  EXPECT_EQ(y, (std::vector<float>{6, 7, 8, 9, 2, 3, 4, 5}));
  std::vector<int32_t> xi(4), yi(4);
  s.fill_ids(1, xi.data(), yi.data());
  EXPECT_EQ(xi, (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(yi, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(TextSource(d.tokens, 4).size(), 2);        // stride defaults to block_size
  EXPECT_EQ(TextSource(d.tokens, 9).size(), 1);        // exactly block_size + 1 tokens
  EXPECT_EQ(TextSource(d.tokens, 2, 1, 5, 10).size(), 3);  // a split's token range

  std::string e = error_of([&] { TextSource(d.tokens, 10, 0, 0, -1, path); });
  EXPECT_CONTAINS(e, "t.txt: 10 tokens, but one sample needs data.block_size + 1 = 11");

  // A validation file with characters the training vocabulary lacks: <unk>, counted.
  const std::string val = write_file(dir, "v.txt", "abXY");
  TextData dv = load_text(val, VocabKind::Char, &d.vocab);
  EXPECT_EQ(dv.unknown, 2);
  EXPECT_EQ(*dv.tokens, (std::vector<int32_t>{1, 2, 0, 0}));
  EXPECT_CONTAINS(error_of([&] { load_text(write_file(dir, "bad.txt", "ok\xFF"), VocabKind::Char); }),
                  "bad.txt: invalid UTF-8 at byte 2");
  EXPECT_EQ(load_text(dir / "bad.txt", VocabKind::Byte).tokens->size(), 3u);
  EXPECT_CONTAINS(error_of([&] { load_text(dir / "nope.txt", VocabKind::Char); }), "nope.txt: cannot open");

  // Through the loader, shuffled with workers: identical to synchronous.
  LoaderOptions opt;
  opt.batch_size = 2;
  opt.shuffle = true;
  opt.workers = 2;
  TextSource s1(d.tokens, 3, 1);
  Loader l(s1, opt);
  l.start_epoch(1);
  auto order = epoch_order(static_cast<size_t>(s1.size()), true, 0, 1);
  const Batch* b = l.next();
  EXPECT_EQ(b->x[0], float(order[0] + 1));
  l.release(b);
}

}  // namespace
}  // namespace seqtrain
