// Copyright (c) executorch-trt authors.
//
// session_file.h: a conversation on disk, in the format py/executorch_trt/llm/session_file.py
// reads and writes (a file saved by either side loads in the other and continues identically).
//
// Layout (little-endian):
//     0   magic "ETRTSESS"
//     8   version u32 (kSessionFormatVersion) | 12 reserved u32 (0) | 16 header_size u64
//     24  header: UTF-8 JSON (below)
//     ..  data: the tensors' bytes, at the header's offsets (relative to the data's start)
//     end BLAKE2b-256 (32 bytes) of every byte before it
// The header:
//     {"format": "executorch_trt.session", "version": 1,
//      "program": {"buffers": [[name, dtype, shape], ...], "program_blake2b": hex,
//                  "data_blake2b": hex or null},
//      "tokens": [ids held], "counters": [names],
//      "tensors": [{"role": "buffer" | "snapshot" | "logits", "name", "dtype", "shape" (as
//                   stored), "offset", "nbytes", "position" (a snapshot's)}],
//      "data_size": bytes}
// A positional buffer (state_layout.h) is stored for the positions held only, the others
// whole; "snapshot" entries are the values of the other buffers after the call that ended at
// `position` (session.h), "logits" the last token's (float32 [vocab]). "program" is the
// fingerprint of the program the session ran on.

#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/common/runtime_types.h"
#include "extension/llm/owned_buffer.h"
#include "extension/llm/state_layout.h"

namespace executorch_trt::extension::llm {

inline constexpr char kSessionMagic[] = "ETRTSESS";  // the first 8 bytes (no terminator)
inline constexpr uint32_t kSessionFormatVersion = 1;
inline constexpr char kSessionFormat[] = "executorch_trt.session";

// What a saved session must match besides the buffers' names, dtypes and shapes: the hex
// BLAKE2b-256 of the program's .pte and of its .ptd (none without one).
struct ProgramFingerprint {
  std::string program_blake2b;
  std::optional<std::string> data_blake2b;
};

// A session's contents: what Session keeps, and what a file holds.
struct SessionContents {
  std::vector<int64_t> tokens;     // the ids held, at positions 0 .. tokens.size() - 1
  std::vector<OwnedBuffer> state;  // every buffer whole, in StateLayout::buffers() order
  // The other buffers that have held the number of tokens held after every call so far.
  std::set<std::string> counters;
  // position -> the other buffers' values after the call that ended there, in
  // StateLayout::other() order.
  std::map<int64_t, std::vector<std::vector<uint8_t>>> snapshots;
  std::optional<std::vector<float>> logits;  // the last token's; none when not computed
};

// Writes `contents` (state in `layout`, holding contents.tokens.size() positions) to `path`
// atomically: a temporary file in the same directory (mode 0600, as Python's tempfile.mkstemp
// makes it), flushed to disk, then renamed over `path`, so a failure leaves the old file (or
// none) and no temporary. A symbolic link at `path` is replaced (not its target).
// Errors (*error names the path): `path` exists and is not a regular file (following symbolic
// links: a directory, a device, a fifo; Error::InvalidArgument, "<path> exists and is not a
// regular file"); a buffer whose dtype a file cannot hold (Error::NotSupported); the file
// cannot be written or renamed (Error::AccessFailed, with the system's reason). Thread-safety:
// reads `contents` only; the caller keeps it unchanged meanwhile.
Error WriteSessionFile(const std::string& path, const StateLayout& layout,
                       const ProgramFingerprint& fingerprint, const SessionContents& contents,
                       std::string* error);

// Reads the session saved at `path` for a program of `layout` and `fingerprint` into
// *contents, whose `state` the caller sets to a fresh state of the program (every buffer at its
// initial value): the held part of each buffer is written into it, and the rest of *contents is
// replaced. Checks, in this order, before anything is taken: the size and magic, the version
// (a newer one is refused), the checksum (truncated or corrupted), the header, the
// fingerprint (naming what differs), the tokens (at most layout.capacity()), each tensor's
// role, dtype, shape and extent, that every buffer is there, and that each listed counter is a
// non-positional integer scalar buffer holding the number of tokens ("'total' is listed as a
// token counter but does not hold the token count (10)").
// Errors (*error is "<path>: <problem>"): the file cannot be opened or read, or is not a
// regular file (Error::AccessFailed, with the reason, e.g. "(Is a directory)"); any check
// (Error::InvalidArgument). On an error *contents may be
// partly written: discard it.
Error ReadSessionFile(const std::string& path, const StateLayout& layout,
                      const ProgramFingerprint& fingerprint, SessionContents* contents,
                      std::string* error);

// ReadSessionFile's checks and reading on a file's bytes already in memory (`size` bytes at
// `data`); `path` only names the file in *error. Reads nothing outside [data, data + size).
Error ParseSessionFile(const uint8_t* data, size_t size, const std::string& path,
                       const StateLayout& layout, const ProgramFingerprint& fingerprint,
                       SessionContents* contents, std::string* error);

}  // namespace executorch_trt::extension::llm
