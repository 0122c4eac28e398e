// Tests for the safetensors reader/writer and ParamStore save/load: round trips, the exact bytes
// the writer produces, atomic writes, and one hand-crafted corrupt file per rule of the format,
// each checking that the error names the file and the tensor. Uses only the library, no CLI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/rng.h"
#include "io/safetensors.h"
#include "safetensors_fixtures.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using seqtrain::testing::every_dtype_tensors;
using seqtrain::testing::tensor_of;
using seqtrain::testing::TempDir;
namespace fs = std::filesystem;

// The message of the seqtrain::Error fn throws, or a marker that makes every HasSubstr fail.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a seqtrain::Error: ") + e.what() + ">";
  }
  return "<no error thrown>";
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file with the given header text and `data_bytes` zero bytes of data.
std::string crafted(const std::string& header, size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\0');
}

ParamStore small_store() {
  ParamStore s;
  s.add("rnn.weight_ih_l0", {8, 3});
  s.add("rnn.bias_ih_l0", {8});
  s.add("head.weight", {4, 2});
  s.add("head.bias", {4});
  s.finalize();
  return s;
}

void fill_random(ParamStore& s, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = 0; i < s.size(); ++i) s.params()[i] = rng.normal();
}

// ---------------------------------------------------------------- round trips

TEST(SafetensorsRoundTrip, AllDTypesShapesAndMetadata) {
  TempDir dir;
  std::string path = dir / "t.safetensors";
  std::vector<NamedTensor> in = every_dtype_tensors();
  Metadata meta = {{"format", "pt"}, {"step", "12"}};
  write_safetensors(path, in, meta);

  SafetensorsFile out = read_safetensors(path);
  EXPECT_EQ(out.path, path);
  EXPECT_EQ(out.metadata, meta);
  ASSERT_EQ(out.tensors.size(), in.size());
  for (const auto& t : in) {
    const NamedTensor& r = out.at(t.name);
    EXPECT_EQ(r.dtype, t.dtype) << t.name;
    EXPECT_EQ(r.shape, t.shape) << t.name;
    EXPECT_EQ(r.bytes, t.bytes) << t.name;
  }
  EXPECT_EQ(out.find("nope"), nullptr);
  EXPECT_THAT(error_of([&] { out.at("nope"); }), AllOf(HasSubstr(path), HasSubstr("'nope'")));
}

TEST(SafetensorsRoundTrip, WriterProducesTheSpecifiedBytes) {
  // Pins the writer to the format by hand: u64 header length, JSON header padded with spaces
  // to 8-byte alignment of the data, then raw little-endian data.
  TempDir dir;
  std::string path = dir / "golden.safetensors";
  float v[2] = {1.0f, -2.0f};
  write_safetensors(path, {NamedTensor::from_f32("a", {2}, v)}, {{"k", "v"}});
  std::string header = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(reinterpret_cast<const char*>(v), 8);
  EXPECT_EQ(read_all(path), le64(header.size()) + header + data);
}

TEST(SafetensorsRoundTrip, EmptyFileHasOnlyAHeader) {
  TempDir dir;
  std::string path = dir / "empty.safetensors";
  write_safetensors(path, std::vector<NamedTensor>{});
  SafetensorsFile f = read_safetensors(path);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST(SafetensorsRoundTrip, ConversionToF32IsExact) {
  // f16: 1, smallest subnormal (2^-24, negative), -inf, 65504 (max), NaN.
  NamedTensor h = tensor_of<uint16_t>("h", StDType::F16, {5}, {0x3c00, 0x8001, 0xfc00, 0x7bff, 0x7e00});
  std::vector<float> f = h.to_f32();
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -std::ldexp(1.0f, -24));
  EXPECT_EQ(f[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[3], 65504.0f);
  EXPECT_TRUE(std::isnan(f[4]));
  // f16 normal with a mantissa: 0x3555 = 0.333251953125
  EXPECT_EQ(tensor_of<uint16_t>("h", StDType::F16, {1}, {0x3555}).to_f32()[0], 0.333251953125f);
  EXPECT_EQ(tensor_of<uint16_t>("b", StDType::BF16, {1}, {0xc040}).to_f32()[0], -3.0f);
  EXPECT_EQ(tensor_of<double>("d", StDType::F64, {1}, {0.1}).to_f32()[0], 0.1f);
  EXPECT_THAT(error_of([] { tensor_of<int32_t>("ints", StDType::I32, {1}, {1}).to_f32(); }),
              AllOf(HasSubstr("'ints'"), HasSubstr("I32")));
}

// ---------------------------------------------------------------- ParamStore

TEST(SafetensorsParams, SaveThenLoadIsBitExact) {
  TempDir dir;
  std::string path = dir / "model.safetensors";
  ParamStore a = small_store();
  fill_random(a, 7);
  save_params(path, a, {{"arch", "lstm"}});

  SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), a.entries().size());
  for (const auto& e : a.entries()) {
    EXPECT_EQ(f.at(e.name).dtype, StDType::F32);
    EXPECT_EQ(f.at(e.name).shape, e.shape);
  }

  ParamStore b = small_store();
  Metadata meta = load_params(path, b);
  EXPECT_EQ(meta.at("arch"), "lstm");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.size() * sizeof(float)), 0);
}

TEST(SafetensorsParams, LoadIgnoresTensorOrderInFile) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore a = small_store();
  fill_random(a, 3);
  std::vector<NamedTensor> rev;
  for (size_t i = a.entries().size(); i-- > 0;)
    rev.push_back(NamedTensor::from_f32(a.entries()[i].name, a.entries()[i].shape, a.param(i).f32()));
  write_safetensors(path, rev);
  ParamStore b = small_store();
  load_params(path, b);
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.size() * sizeof(float)), 0);
}

TEST(SafetensorsParams, MissingTensorIsNamed) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore a = small_store();
  std::vector<NamedTensor> ts;
  for (size_t i = 0; i < a.entries().size(); ++i)
    if (a.entries()[i].name != "head.bias")
      ts.push_back(NamedTensor::from_f32(a.entries()[i].name, a.entries()[i].shape, a.param(i).f32()));
  write_safetensors(path, ts);
  EXPECT_THAT(error_of([&] { load_params(path, a); }),
              AllOf(HasSubstr(path), HasSubstr("'head.bias'"), HasSubstr("missing")));
}

TEST(SafetensorsParams, UnexpectedTensorIsNamedAndExpectedListed) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore a = small_store();
  std::vector<NamedTensor> ts;
  for (size_t i = 0; i < a.entries().size(); ++i)
    ts.push_back(NamedTensor::from_f32(a.entries()[i].name, a.entries()[i].shape, a.param(i).f32()));
  float x = 1;
  ts.push_back(NamedTensor::from_f32("rnn.weight_ih_l1", {1}, &x));
  write_safetensors(path, ts);
  EXPECT_THAT(error_of([&] { load_params(path, a); }),
              AllOf(HasSubstr(path), HasSubstr("unexpected tensor 'rnn.weight_ih_l1'"),
                    HasSubstr("rnn.weight_ih_l0, rnn.bias_ih_l0, head.weight, head.bias")));
}

TEST(SafetensorsParams, ShapeMismatchNamesTensorAndBothShapes) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore other;
  other.add("rnn.weight_ih_l0", {8, 5});
  other.add("rnn.bias_ih_l0", {8});
  other.add("head.weight", {4, 2});
  other.add("head.bias", {4});
  other.finalize();
  save_params(path, other);
  ParamStore a = small_store();
  fill_random(a, 1);
  std::vector<float> before(a.params(), a.params() + a.size());
  EXPECT_THAT(error_of([&] { load_params(path, a); }),
              AllOf(HasSubstr(path), HasSubstr("'rnn.weight_ih_l0'"), HasSubstr("[8, 5]"), HasSubstr("[8, 3]")));
  // A refused file must not have half-loaded the model.
  EXPECT_EQ(std::memcmp(before.data(), a.params(), a.size() * sizeof(float)), 0);
}

TEST(SafetensorsParams, ConvertsF64F16BF16ToF32) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore s;
  s.add("a", {2});
  s.add("b", {2});
  s.add("c", {1});
  s.finalize();
  write_safetensors(path, {tensor_of<double>("a", StDType::F64, {2}, {0.5, -0.1}),
                           tensor_of<uint16_t>("b", StDType::F16, {2}, {0xc000, 0x0001}),
                           tensor_of<uint16_t>("c", StDType::BF16, {1}, {0x4049})});
  load_params(path, s);
  EXPECT_EQ(s.params()[0], 0.5f);
  EXPECT_EQ(s.params()[1], -0.1f);
  EXPECT_EQ(s.params()[2], -2.0f);
  EXPECT_EQ(s.params()[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(s.params()[4], std::bit_cast<float>(0x40490000u));
}

TEST(SafetensorsParams, IntegerTensorIsRefused) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore s;
  s.add("w", {2});
  s.finalize();
  write_safetensors(path, {tensor_of<int32_t>("w", StDType::I32, {2}, {1, 2})});
  EXPECT_THAT(error_of([&] { load_params(path, s); }), AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("I32")));
}

TEST(SafetensorsParams, FlatBuffersUsePrefixedNames) {
  TempDir dir;
  std::string path = dir / "optimizer.safetensors";
  ParamStore s = small_store();
  std::vector<float> m(s.size()), v(s.size());
  for (size_t i = 0; i < s.size(); ++i) { m[i] = float(i); v[i] = -float(i) * 0.5f; }
  std::vector<FlatBuffer> out = {{"exp_avg.", m.data()}, {"exp_avg_sq.", v.data()}};
  save_flat(path, s, out, {{"step", "3"}});
  EXPECT_NE(read_safetensors(path).find("exp_avg_sq.head.bias"), nullptr);

  std::vector<float> m2(s.size()), v2(s.size());
  std::vector<FlatBufferOut> in = {{"exp_avg.", m2.data()}, {"exp_avg_sq.", v2.data()}};
  EXPECT_EQ(load_flat(path, s, in).at("step"), "3");
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);

  std::vector<FlatBufferOut> only_m = {{"exp_avg.", m2.data()}};
  EXPECT_THAT(error_of([&] { load_flat(path, s, only_m); }), HasSubstr("unexpected tensor 'exp_avg_sq."));
}

TEST(SafetensorsParams, UnbuiltStoreIsRefused) {
  TempDir dir;
  ParamStore s;
  s.add("w", {2});
  EXPECT_THAT(error_of([&] { save_params(dir / "m.safetensors", s); }), HasSubstr("finalize"));
}

// ---------------------------------------------------------------- atomic writes

TEST(SafetensorsWrite, FailedWriteThrowsAndLeavesNoFile) {
  TempDir dir;
  std::string path = dir / "no_such_dir/model.safetensors";
  float x = 1;
  EXPECT_THAT(error_of([&] { write_safetensors(path, {NamedTensor::from_f32("w", {1}, &x)}); }),
              AllOf(HasSubstr(path), HasSubstr("directory exist")));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(SafetensorsWrite, OverwriteReplacesWholeFileAndLeavesNoTemporary) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  ParamStore a = small_store();
  fill_random(a, 1);
  save_params(path, a);
  fill_random(a, 2);
  save_params(path, a);
  ParamStore b = small_store();
  load_params(path, b);
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.size() * sizeof(float)), 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.safetensors"});
}

TEST(SafetensorsWrite, RefusedWriteKeepsPreviousFile) {
  TempDir dir;
  std::string path = dir / "m.safetensors";
  float x = 1, y = 2;
  write_safetensors(path, {NamedTensor::from_f32("w", {1}, &x)});
  std::string before = read_all(path);
  EXPECT_THAT(error_of([&] {
                write_safetensors(path, {NamedTensor::from_f32("w", {1}, &y), NamedTensor::from_f32("w", {1}, &y)});
              }),
              AllOf(HasSubstr(path), HasSubstr("'w' given twice")));
  EXPECT_THAT(error_of([&] { write_safetensors(path, {NamedTensor::from_f32("__metadata__", {1}, &y)}); }),
              HasSubstr("reserved"));
  NamedTensor bad = NamedTensor::from_f32("w", {2}, &y);
  bad.bytes.resize(4);
  EXPECT_THAT(error_of([&] { write_safetensors(path, {bad}); }), AllOf(HasSubstr("'w'"), HasSubstr("4 bytes")));
  EXPECT_EQ(read_all(path), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);
}

// ---------------------------------------------------------------- format rules on read

// Writes `bytes` to a file and returns read_safetensors's error message for it.
struct Corrupt : ::testing::Test {
  TempDir dir;
  std::string path = dir / "bad.safetensors";
  std::string error_for(const std::string& bytes) {
    write_all(path, bytes);
    return error_of([&] { read_safetensors(path); });
  }
};
using SafetensorsRead = Corrupt;

const std::string kW = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

TEST_F(SafetensorsRead, WellFormedCraftedFileLoads) {
  // The baseline the corrupt cases below each break in one way.
  write_all(path, crafted("{" + kW + "}  ", 8));
  EXPECT_EQ(read_safetensors(path).at("w").shape, (Shape{2}));
}

TEST_F(SafetensorsRead, MissingFile) {
  EXPECT_THAT(error_of([&] { read_safetensors(dir / "absent.safetensors"); }),
              AllOf(HasSubstr("absent.safetensors"), HasSubstr("cannot open")));
}

TEST_F(SafetensorsRead, ShorterThanEightBytes) {
  EXPECT_THAT(error_for(std::string("\x05\0\0", 3)), AllOf(HasSubstr(path), HasSubstr("shorter than the 8-byte")));
  EXPECT_THAT(error_for(""), AllOf(HasSubstr(path), HasSubstr("0 bytes")));
}

TEST_F(SafetensorsRead, HeaderLengthPastEndOfFile) {
  EXPECT_THAT(error_for(le64(100) + "{}"), AllOf(HasSubstr(path), HasSubstr("header length 100"), HasSubstr("truncated")));
}

TEST_F(SafetensorsRead, HeaderLengthOverLimit) {
  EXPECT_THAT(error_for(le64(200'000'000) + "{}"), AllOf(HasSubstr(path), HasSubstr("exceeds the format's limit")));
  EXPECT_THAT(error_for(le64(~uint64_t{0}) + "{}"), AllOf(HasSubstr(path), HasSubstr("exceeds the format's limit")));
}

TEST_F(SafetensorsRead, HeaderMustStartWithBrace) {
  EXPECT_THAT(error_for(crafted(" {}", 0)), AllOf(HasSubstr(path), HasSubstr("does not start with '{'")));
  EXPECT_THAT(error_for(crafted("[]", 0)), AllOf(HasSubstr(path), HasSubstr("does not start with '{'")));
  EXPECT_THAT(error_for(le64(0)), AllOf(HasSubstr(path), HasSubstr("does not start with '{'")));
}

TEST_F(SafetensorsRead, InvalidJsonReportsParseError) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32",)", 0)),
              AllOf(HasSubstr(path), HasSubstr("not valid JSON"), HasSubstr("parse error")));
  EXPECT_THAT(error_for(crafted("{" + kW + "}x", 8)), AllOf(HasSubstr(path), HasSubstr("not valid JSON")));
}

TEST_F(SafetensorsRead, EntryMustBeObject) {
  EXPECT_THAT(error_for(crafted(R"({"w":[1,2]})", 0)), AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("object")));
}

TEST_F(SafetensorsRead, MissingDType) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("no \"dtype\"")));
}

TEST_F(SafetensorsRead, UnknownDType) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("unknown dtype \"F8\"")));
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("non-string")));
}

TEST_F(SafetensorsRead, MissingShape) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("no \"shape\"")));
}

TEST_F(SafetensorsRead, ShapeMustBeNonNegativeIntegers) {
  for (std::string shape : {"[-2]", "[2.0]", "[\"2\"]", "2", "[true]"})
    EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,8]}})", 8)),
                AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("\"shape\"")))
        << shape;
}

TEST_F(SafetensorsRead, ShapeElementCountOverflow) {
  EXPECT_THAT(error_for(crafted(
                  R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("overflows")));
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("absurd")));
}

TEST_F(SafetensorsRead, ShapeLargerThanFile) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("holds only 8 bytes")));
}

TEST_F(SafetensorsRead, MissingDataOffsets) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[2]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("no \"data_offsets\"")));
}

TEST_F(SafetensorsRead, DataOffsetsMustBeTwoNonNegativeIntegers) {
  for (std::string off : {"[0]", "[0,8,8]", "[-8,0]", "[0,8.0]", "{}"})
    EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)" + off + "}}", 8)),
                AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("[begin, end]")))
        << off;
}

TEST_F(SafetensorsRead, DataOffsetsBeginAfterEnd) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("begin after end")));
}

TEST_F(SafetensorsRead, ByteLengthMustMatchShape) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 12)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("(12 bytes)"), HasSubstr("needs 8 bytes")));
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 16)),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("needs 16 bytes")));
}

TEST_F(SafetensorsRead, GapBetweenTensors) {
  std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  EXPECT_THAT(error_for(crafted(h, 12)), AllOf(HasSubstr(path), HasSubstr("gap before tensor 'b'"), HasSubstr("[4, 8)")));
}

TEST_F(SafetensorsRead, DataMustStartAtOffsetZero) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("gap before tensor 'w'")));
}

TEST_F(SafetensorsRead, OverlappingTensors) {
  std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_THAT(error_for(crafted(h, 8)), AllOf(HasSubstr(path), HasSubstr("'b'"), HasSubstr("overlaps tensor 'a'")));
}

TEST_F(SafetensorsRead, DuplicateTensorName) {
  // nlohmann would keep only the second entry; the reader must notice the first.
  EXPECT_THAT(error_for(crafted("{" + kW + "," + kW + "}", 8)),
              AllOf(HasSubstr(path), HasSubstr("'w' appears twice")));
}

TEST_F(SafetensorsRead, DuplicateKeyInsideEntry) {
  EXPECT_THAT(error_for(crafted(R"({"w":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8)),
              AllOf(HasSubstr(path), HasSubstr("'dtype' appears twice"), HasSubstr("'w'")));
}

TEST_F(SafetensorsRead, TrailingBytesAfterLastTensor) {
  EXPECT_THAT(error_for(crafted("{" + kW + "}", 9)),
              AllOf(HasSubstr(path), HasSubstr("1 bytes after the last tensor")));
  EXPECT_THAT(error_for(crafted("{}", 3)), AllOf(HasSubstr(path), HasSubstr("3 bytes after the last tensor")));
}

TEST_F(SafetensorsRead, TruncatedData) {
  std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_THAT(error_for(crafted(h, 6)), AllOf(HasSubstr(path), HasSubstr("'b'"), HasSubstr("truncated")));
}

TEST_F(SafetensorsRead, MetadataValuesMustBeStrings) {
  EXPECT_THAT(error_for(crafted(R"({"__metadata__":{"step":3}})", 0)),
              AllOf(HasSubstr(path), HasSubstr("'step'"), HasSubstr("must be strings")));
  EXPECT_THAT(error_for(crafted(R"({"__metadata__":"x"})", 0)), AllOf(HasSubstr(path), HasSubstr("__metadata__")));
}

TEST_F(SafetensorsRead, ZeroSizedTensorsMayShareAnOffset) {
  std::string h = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("c":{"dtype":"F64","shape":[0,3],"data_offsets":[4,4]}})";
  write_all(path, crafted(h, 4));
  EXPECT_EQ(read_safetensors(path).tensors.size(), 3u);
}

}  // namespace
}  // namespace seqtrain
