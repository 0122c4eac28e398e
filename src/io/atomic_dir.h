// Crash-safe file and directory publishing: write into a temporary name, fsync, then rename
// into place, so a reader (or a crash at any instant) sees either the old whole thing or the
// new whole thing, never a half-written one.
#pragma once
#include <cstdint>
#include <string>

namespace seqtrain {

// Writes `bytes` to `path` atomically (temporary file in the same directory, fsync, rename,
// fsync of the directory).
void write_file_atomic(const std::string& path, const std::string& bytes);

// Makes `tmp_dir` (fully written, files fsynced) appear as `final_dir`, replacing an older
// `final_dir` if present. The older one is moved aside first and deleted only after the new
// one is in place.
void publish_dir(const std::string& tmp_dir, const std::string& final_dir);

void fsync_path(const std::string& path);  // a file or a directory

// FNV-1a 64 of a file's bytes, streamed (checkpoint checksums, data cache keys); `purpose`
// finishes the error message ("to verify its checksum").
uint64_t file_fnv1a(const std::string& path, const std::string& purpose);
// The same as 16 hex digits (checkpoint checksums).
std::string file_checksum(const std::string& path);

}  // namespace seqtrain
