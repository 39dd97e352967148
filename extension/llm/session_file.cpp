// Copyright (c) executorch-trt authors.

#include "extension/llm/session_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "extension/llm/blake2b_256.h"
#include "extension/llm/dtype_names.h"

namespace executorch_trt::extension::llm {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kMagicSize = 8;
constexpr size_t kHeaderSize = 24;  // magic, version, reserved, header_size
constexpr size_t kDigestSize = 32;

// One run of bytes of the data section, in file order.
struct Piece {
  const uint8_t* data;
  size_t size;
};

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

std::string Errno() { return std::strerror(errno); }

// The directory part of `path` ("." for a bare name), where the temporary file goes so that
// the rename stays on one file system.
std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool WriteAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The JSON of a shape (Python writes lists of ints).
json ShapeJson(const std::vector<int64_t>& sizes) {
  json shape = json::array();
  for (int64_t s : sizes) {
    shape.push_back(s);
  }
  return shape;
}

// `v` as an int64 when it is a JSON integer that fits.
bool Int(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

// A list of names as Python prints one: "['a', 'b']".
std::string NameList(const std::vector<std::string>& names) {
  std::string s = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i ? ", '" : "'") + names[i] + "'";
  }
  return s + "]";
}

// What differs between the fingerprint a file was saved from and the program's; "" when
// nothing does.
std::string FingerprintDifference(const json& saved, const StateLayout& layout,
                                  const ProgramFingerprint& current) {
  if (!saved.is_object()) {
    return "the file has no program fingerprint";
  }
  std::map<std::string, json> saved_buffers;  // name -> [dtype, shape]
  const auto buffers = saved.find("buffers");
  if (buffers != saved.end() && buffers->is_array()) {
    for (const json& b : *buffers) {
      if (b.is_array() && !b.empty() && b[0].is_string()) {
        saved_buffers[b[0].get<std::string>()] = json(b.begin() + 1, b.end());
      }
    }
  }
  std::vector<std::string> problems;
  std::vector<std::string> missing;
  for (const BufferLayout& b : layout.buffers()) {
    if (saved_buffers.count(b.name) == 0) {
      missing.push_back(b.name);
    }
  }
  std::vector<std::string> extra;
  for (const auto& [name, spec] : saved_buffers) {
    if (layout.Find(name) == layout.buffers().size()) {
      extra.push_back(name);
    }
  }
  if (!missing.empty()) {
    problems.push_back("the file has no buffer " + NameList(missing));
  }
  if (!extra.empty()) {
    problems.push_back("the file has buffers this program does not (" + NameList(extra) + ")");
  }
  for (const BufferLayout& b : layout.buffers()) {
    const auto it = saved_buffers.find(b.name);
    if (it == saved_buffers.end()) {
      continue;
    }
    const json mine = json::array({DTypeName(b.dtype), ShapeJson(b.sizes)});
    if (it->second != mine) {
      problems.push_back("buffer '" + b.name + "' is " + it->second.dump() + " in the file and " +
                         mine.dump() + " in this program");
    }
  }
  const std::pair<const char*, const char*> hashes[] = {{"program_blake2b", "the .pte"},
                                                        {"data_blake2b", "the .ptd"}};
  for (const auto& [key, what] : hashes) {
    const json here = std::string(key) == "program_blake2b"
                          ? json(current.program_blake2b)
                          : (current.data_blake2b ? json(*current.data_blake2b) : json(nullptr));
    const auto it = saved.find(key);
    const json there = it == saved.end() ? json(nullptr) : *it;
    if (there != here) {
      const auto shown = [](const json& v) {
        return (v.is_string() ? v.get<std::string>() : v.dump()).substr(0, 16) + "...";
      };
      problems.push_back(std::string(what) + " differs (BLAKE2b " + shown(there) +
                         " in the file, " + shown(here) + " here)");
    }
  }
  std::string joined;
  for (const std::string& p : problems) {
    joined += (joined.empty() ? "" : "; ") + p;
  }
  return joined;
}

// One stored tensor, checked against the data section.
struct Stored {
  std::string role;
  std::string name;
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  const json* entry = nullptr;
};

// Reads tensor entry `entry`; "" on success, else the problem.
std::string ReadStored(const json& entry, const uint8_t* data, uint64_t data_size, Stored* out) {
  if (!entry.is_object()) {
    return "a tensor entry is malformed: " + entry.dump();
  }
  const auto field = [&](const char* key) -> const json* {
    const auto it = entry.find(key);
    return it == entry.end() ? nullptr : &*it;
  };
  const json* role = field("role");
  const json* name = field("name");
  const json* dtype = field("dtype");
  const json* shape = field("shape");
  const json* offset = field("offset");
  const json* nbytes = field("nbytes");
  if (role == nullptr || !role->is_string() || name == nullptr || !name->is_string() ||
      dtype == nullptr || !dtype->is_string() || shape == nullptr || !shape->is_array() ||
      offset == nullptr || nbytes == nullptr) {
    return "a tensor entry is malformed: " + entry.dump();
  }
  out->role = role->get<std::string>();
  out->name = name->get<std::string>();
  out->entry = &entry;
  const std::string dtype_name = dtype->get<std::string>();
  if (!ParseDTypeName(dtype_name, &out->dtype)) {
    return "tensor '" + out->name + "' has unknown dtype '" + dtype_name + "'";
  }
  // numel * element size, bounded by the data section so that it cannot overflow.
  uint64_t expected = executorch::runtime::elementSize(out->dtype);
  for (const json& s : *shape) {
    int64_t size = 0;
    if (!Int(s, &size)) {
      return "a tensor entry is malformed: " + entry.dump();
    }
    if (size < 0) {
      return "tensor '" + out->name + "' has a negative size in " + shape->dump();
    }
    out->shape.push_back(size);
    expected = size == 0 || expected == 0
                   ? 0
                   : (expected > (data_size + 1) / static_cast<uint64_t>(size)
                          ? data_size + 1  // larger than any extent: refused below
                          : expected * static_cast<uint64_t>(size));
  }
  int64_t at = 0;
  int64_t size = 0;
  if (!Int(*offset, &at) || !Int(*nbytes, &size) || static_cast<uint64_t>(size) != expected ||
      at < 0 || size < 0 || static_cast<uint64_t>(at) > data_size ||
      static_cast<uint64_t>(size) > data_size - static_cast<uint64_t>(at)) {
    return "tensor '" + out->name + "' (" + dtype_name + " " + shape->dump() +
           ") does not fit its extent (offset " + offset->dump() + ", " + nbytes->dump() +
           " bytes, data " + std::to_string(data_size) + " bytes)";
  }
  out->data = data + at;
  out->nbytes = static_cast<size_t>(size);
  return "";
}

}  // namespace

Error WriteSessionFile(const std::string& path, const StateLayout& layout,
                       const ProgramFingerprint& fingerprint, const SessionContents& contents,
                       std::string* error) {
  const auto position = static_cast<int64_t>(contents.tokens.size());
  ordered_json tensors = ordered_json::array();
  std::vector<Piece> pieces;
  uint64_t offset = 0;
  const auto add = [&](const char* role, const std::string& name, ScalarType dtype,
                       const std::vector<int64_t>& shape, size_t nbytes,
                       const std::optional<int64_t>& at) -> bool {
    const std::string dtype_name = DTypeName(dtype);
    if (dtype_name.empty()) {
      *error = "save: " + path + ": buffer '" + name + "' has dtype " +
               executorch::runtime::toString(dtype) + ", which a session file cannot hold";
      return false;
    }
    ordered_json entry = {{"role", role},   {"name", name},     {"dtype", dtype_name},
                          {"shape", shape}, {"offset", offset}, {"nbytes", nbytes}};
    if (at) {
      entry["position"] = *at;
    }
    tensors.push_back(std::move(entry));
    offset += nbytes;
    return true;
  };
  for (size_t i = 0; i < layout.buffers().size(); ++i) {
    const BufferLayout& b = layout.buffers()[i];
    if (!add("buffer", b.name, b.dtype, layout.HeldSizes(i, position),
             layout.HeldBytes(i, position), std::nullopt)) {
      return Error::NotSupported;
    }
    layout.ForEachHeldPiece(i, position, [&](size_t at, size_t size) {
      pieces.push_back({contents.state[i].data() + at, size});
    });
  }
  for (const auto& [p, values] : contents.snapshots) {
    for (size_t k = 0; k < layout.other().size(); ++k) {
      const BufferLayout& b = layout.buffers()[layout.other()[k]];
      if (!add("snapshot", b.name, b.dtype, b.sizes, values[k].size(), p)) {
        return Error::NotSupported;
      }
      pieces.push_back({values[k].data(), values[k].size()});
    }
  }
  if (contents.logits) {
    const std::vector<float>& logits = *contents.logits;
    add("logits", "logits", ScalarType::Float, {static_cast<int64_t>(logits.size())},
        logits.size() * sizeof(float), std::nullopt);
    pieces.push_back({reinterpret_cast<const uint8_t*>(logits.data()), logits.size() * 4});
  }
  ordered_json buffers = ordered_json::array();
  for (const BufferLayout& b : layout.buffers()) {
    buffers.push_back(ordered_json::array({b.name, DTypeName(b.dtype), b.sizes}));
  }
  ordered_json program = {{"buffers", std::move(buffers)},
                          {"program_blake2b", fingerprint.program_blake2b},
                          {"data_blake2b", nullptr}};
  if (fingerprint.data_blake2b) {
    program["data_blake2b"] = *fingerprint.data_blake2b;
  }
  const ordered_json header = {
      {"format", kSessionFormat},
      {"version", kSessionFormatVersion},
      {"program", std::move(program)},
      {"tokens", contents.tokens},
      {"counters", std::vector<std::string>(contents.counters.begin(), contents.counters.end())},
      {"tensors", std::move(tensors)},
      {"data_size", offset},
  };
  // Names the program gave its buffers are written as they are; bytes that are not UTF-8 (which
  // JSON cannot hold) become U+FFFD rather than an exception.
  const std::string text = header.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  std::string prefix(kSessionMagic, kMagicSize);
  PutU32(kSessionFormatVersion, &prefix);
  PutU32(0, &prefix);
  PutU64(text.size(), &prefix);
  prefix += text;
  Blake2b256 hash;
  hash.Update(prefix.data(), prefix.size());
  for (const Piece& piece : pieces) {
    hash.Update(piece.data, piece.size);
  }
  const Blake2b256Digest digest = hash.Digest();

  // The rename would replace whatever is at `path`: only a regular file (or a symbolic link to
  // one, which is replaced, not its target) is a session file to replace. A directory, a device
  // or a fifo is refused (as root, renaming onto /dev/full replaces the device node).
  struct stat existing;
  if (::stat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    *error = "save: " + path + " exists and is not a regular file";
    return Error::InvalidArgument;
  }
  std::string temporary = DirectoryOf(path) + "/.session-XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) {
    *error = "save: " + path + ": cannot create a temporary file in " + DirectoryOf(path) + " (" +
             Errno() + ")";
    return Error::AccessFailed;
  }
  bool ok = WriteAll(fd, prefix.data(), prefix.size());
  for (size_t i = 0; ok && i < pieces.size(); ++i) {
    ok = WriteAll(fd, pieces[i].data, pieces[i].size);
  }
  ok = ok && WriteAll(fd, digest.data(), digest.size());
  // mkstemp makes the file 0600 (owner only), as Python's tempfile.mkstemp does: a session
  // holds the conversation.
  ok = ok && ::fsync(fd) == 0;
  std::string reason = ok ? "" : Errno();
  ok = ::close(fd) == 0 && ok;
  if (ok && ::rename(temporary.c_str(), path.c_str()) != 0) {
    ok = false;
    reason = Errno();
  }
  if (!ok) {
    ::unlink(temporary.c_str());
    *error = "save: " + path + ": cannot write the session file (" +
             (reason.empty() ? Errno() : reason) + "); the previous file, if any, is unchanged";
    return Error::AccessFailed;
  }
  return Error::Ok;
}

Error ReadSessionFile(const std::string& path, const StateLayout& layout,
                      const ProgramFingerprint& fingerprint, SessionContents* contents,
                      std::string* error) {
  std::vector<uint8_t> file;
  {
    // O_NONBLOCK: opening a fifo does not wait for a writer (a regular file ignores it).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      *error = path + ": cannot open the session file (" + Errno() + ")";
      return Error::AccessFailed;
    }
    // A directory says so; a fifo or a device (which could read forever) is not read at all.
    struct stat st;
    if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
      *error = path + ": cannot read the session file (" +
               (S_ISDIR(st.st_mode) ? std::string(std::strerror(EISDIR)) : "not a regular file") +
               ")";
      ::close(fd);
      return Error::AccessFailed;
    }
    uint8_t block[1 << 16];
    ssize_t n = 0;
    while ((n = ::read(fd, block, sizeof(block))) != 0) {
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        // E.g. a directory, which opens but does not read: "(Is a directory)".
        *error = path + ": cannot read the session file (" + Errno() + ")";
        ::close(fd);
        return Error::AccessFailed;
      }
      file.insert(file.end(), block, block + n);
    }
    ::close(fd);
  }
  return ParseSessionFile(file.data(), file.size(), path, layout, fingerprint, contents, error);
}

Error ParseSessionFile(const uint8_t* file_data, size_t file_size, const std::string& path,
                       const StateLayout& layout, const ProgramFingerprint& fingerprint,
                       SessionContents* contents, std::string* error) {
  const auto bad = [&](const std::string& problem) {
    *error = path + ": " + problem;
    return Error::InvalidArgument;
  };
  const size_t size = file_size;
  if (size < kHeaderSize + kDigestSize) {
    return bad("truncated: " + std::to_string(size) +
               " bytes, shorter than a session file's header and checksum");
  }
  if (std::memcmp(file_data, kSessionMagic, kMagicSize) != 0) {
    return bad("not a session file (its first 8 bytes are not \"ETRTSESS\")");
  }
  const auto version = static_cast<uint32_t>(GetLe(file_data + 8, 4));
  if (version > kSessionFormatVersion) {
    return bad("written by a newer executorch_trt (session format version " +
               std::to_string(version) + "); this one reads version " +
               std::to_string(kSessionFormatVersion) + ": upgrade it to load the file");
  }
  if (version < 1) {
    return bad("session format version " + std::to_string(version) + " is not a version");
  }
  Blake2b256 hash;
  hash.Update(file_data, size - kDigestSize);
  const Blake2b256Digest digest = hash.Digest();
  if (std::memcmp(digest.data(), file_data + size - kDigestSize, kDigestSize) != 0) {
    return bad("truncated or corrupted (" + std::to_string(size) +
               " bytes; the BLAKE2b-256 at its end does not match its contents); save the "
               "session again");
  }
  const uint64_t header_size = GetLe(file_data + 16, 8);
  if (header_size > size - kHeaderSize - kDigestSize) {
    return bad("its header says " + std::to_string(header_size) + " bytes of JSON, the file has " +
               std::to_string(size) + " bytes");
  }
  const auto* text = reinterpret_cast<const char*>(file_data + kHeaderSize);
  const json header = json::parse(text, text + header_size, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return bad("its header cannot be read (not a JSON object)");
  }
  const auto tokens = header.find("tokens");
  const auto counters = header.find("counters");
  const auto entries = header.find("tensors");
  const auto data_size_field = header.find("data_size");
  int64_t data_size = 0;
  if (tokens == header.end() || counters == header.end() || entries == header.end() ||
      data_size_field == header.end() || !counters->is_array() || !entries->is_array() ||
      !Int(*data_size_field, &data_size) || data_size < 0) {
    return bad("its header cannot be read (it needs tokens, counters, tensors and data_size)");
  }
  const uint64_t base = kHeaderSize + header_size;
  if (static_cast<uint64_t>(data_size) != size - kDigestSize - base) {
    return bad("its header says " +
               std::to_string(base + static_cast<uint64_t>(data_size) + kDigestSize) +
               " bytes, the file has " + std::to_string(size));
  }
  const auto program = header.find("program");
  const std::string difference =
      FingerprintDifference(program == header.end() ? json() : *program, layout, fingerprint);
  if (!difference.empty()) {
    return bad("saved from another program: " + difference);
  }
  std::vector<int64_t> ids;
  bool ids_ok = tokens->is_array() && tokens->size() <= static_cast<size_t>(layout.capacity());
  for (size_t i = 0; ids_ok && i < tokens->size(); ++i) {
    int64_t id = 0;
    ids_ok = Int((*tokens)[i], &id);
    ids.push_back(id);
  }
  if (!ids_ok) {
    return bad("its token ids are not a list of at most max_context_len (" +
               std::to_string(layout.capacity()) + ") ints");
  }
  const auto position = static_cast<int64_t>(ids.size());
  const uint8_t* data = file_data + base;
  std::vector<bool> seen(layout.buffers().size(), false);
  std::map<int64_t, std::vector<std::vector<uint8_t>>> snapshots;
  std::map<int64_t, std::vector<bool>> snapshot_seen;
  std::optional<std::vector<float>> logits;
  for (const json& entry : *entries) {
    Stored t;
    const std::string problem = ReadStored(entry, data, static_cast<uint64_t>(data_size), &t);
    if (!problem.empty()) {
      return bad(problem);
    }
    if (t.role == "buffer") {
      const size_t i = layout.Find(t.name);
      if (i == layout.buffers().size()) {
        return bad("buffer '" + t.name + "' is not this program's");
      }
      const BufferLayout& b = layout.buffers()[i];
      const std::vector<int64_t> held = layout.HeldSizes(i, position);
      if (t.shape != held || t.dtype != b.dtype) {
        return bad("buffer '" + t.name + "' is " + DTypeName(t.dtype) + " " +
                   ShapeJson(t.shape).dump() + ", " + std::to_string(position) + " tokens need " +
                   DTypeName(b.dtype) + " " + ShapeJson(held).dump());
      }
      size_t from = 0;
      layout.ForEachHeldPiece(i, position, [&](size_t at, size_t n) {
        std::memcpy(contents->state[i].data() + at, t.data + from, n);
        from += n;
      });
      seen[i] = true;
    } else if (t.role == "snapshot") {
      const auto at = t.entry->find("position");
      int64_t p = -1;
      const size_t i = layout.Find(t.name);
      size_t k = 0;
      while (k < layout.other().size() && layout.other()[k] != i) {
        ++k;
      }
      if (at == t.entry->end() || !Int(*at, &p) || p < 0 || p > position ||
          k == layout.other().size()) {
        return bad("snapshot of '" + t.name + "' at " +
                   (at == t.entry->end() ? std::string("no position") : at->dump()) +
                   " is not a held position's value of a buffer that is not positional");
      }
      const BufferLayout& b = layout.buffers()[i];
      if (t.shape != b.sizes || t.dtype != b.dtype) {
        return bad("snapshot of '" + t.name + "' is " + DTypeName(t.dtype) + " " +
                   ShapeJson(t.shape).dump() + ", the buffer is " + DTypeName(b.dtype) + " " +
                   ShapeJson(b.sizes).dump());
      }
      auto& values = snapshots[p];
      values.resize(layout.other().size());
      values[k].assign(t.data, t.data + t.nbytes);
      auto& got = snapshot_seen[p];
      got.resize(layout.other().size(), false);
      got[k] = true;
    } else if (t.role == "logits") {
      if (t.dtype != ScalarType::Float || t.shape.size() != 1) {
        return bad("its logits are " + DTypeName(t.dtype) + " " + ShapeJson(t.shape).dump() +
                   ", not float32 [vocab]");
      }
      std::vector<float> values(t.nbytes / sizeof(float));
      std::memcpy(values.data(), t.data, t.nbytes);
      logits = std::move(values);
    } else {
      return bad("unknown tensor role '" + t.role + "'");
    }
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      missing.push_back(layout.buffers()[i].name);
    }
  }
  if (!missing.empty()) {
    return bad("no data for buffer(s) " + NameList(missing));
  }
  for (const auto& [p, got] : snapshot_seen) {
    for (size_t k = 0; k < got.size(); ++k) {
      if (!got[k]) {
        return bad("the snapshot at " + std::to_string(p) + " has no value of buffer '" +
                   layout.buffers()[layout.other()[k]].name + "'");
      }
    }
  }
  // A listed counter is set to n by a rewind instead of being restored: it must be one (a
  // buffer the program's probe found counting tokens, holding the number of tokens held), or a
  // rewind would overwrite another buffer with n.
  std::set<std::string> counter_names;
  for (const json& name : *counters) {
    if (!name.is_string()) {
      return bad("its counters are not a list of buffer names: " + counters->dump());
    }
    const std::string counter = name.get<std::string>();
    const size_t i = layout.Find(counter);
    const std::optional<int64_t> value =
        i < layout.buffers().size() && layout.buffers()[i].counter
            ? IntegerScalarValue(layout.buffers()[i], contents->state[i].data())
            : std::nullopt;
    if (value != position) {
      return bad("'" + counter +
                 "' is listed as a token counter but does not hold the token count (" +
                 std::to_string(position) + ")");
    }
    counter_names.insert(counter);
  }
  contents->tokens = std::move(ids);
  contents->counters = std::move(counter_names);
  contents->snapshots = std::move(snapshots);
  contents->logits = std::move(logits);
  return Error::Ok;
}

}  // namespace executorch_trt::extension::llm
