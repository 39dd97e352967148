// Copyright (c) executorch-trt authors.

#include "extension/program/loaded_program.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <utility>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/tensor_shape_dynamism.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method_meta.h>

#include "core/common/error_text.h"
#include "core/common/shape_string.h"
#include "extension/program/program_delegates.h"

namespace executorch_trt::extension {
namespace {

using executorch::runtime::MethodMeta;

// Planned buffers shared between methods, as Module(share_memory_arenas=true) shares them:
// mem_id 1 (activations) and mem_id 2 (mutable buffers shared with share_mutable_buffers).
constexpr size_t kSharedPlannedBuffers = 2;

const std::vector<uint8_t>& NoBytes() {
  static const std::vector<uint8_t> empty;
  return empty;
}

// Whether the loader's bytes carry the flatbuffer file identifier `id` (bytes 4-7): "ET12" a
// program, "BP08" a bundled program (devtools/bundled_program/schema), "FT01" a data file
// (extension/flat_tensor/serialize).
bool HasFileIdentifier(executorch::runtime::DataLoader& loader, const char (&id)[5]) {
  using executorch::runtime::DataLoader;
  Result<executorch::runtime::FreeableBuffer> head =
      loader.load(0, 8, DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
  return head.ok() && head->size() == 8 &&
         std::memcmp(static_cast<const char*>(head->data()) + 4, id, 4) == 0;
}

// A file's loader. Memory-mapped (ExecuTorch's MmapDataLoader, as its Module loads files), not
// read: a weight is then read where it lies in the file instead of copied into a heap buffer,
// and the pages a delegate no longer needs (XNNPACK's unpacked weights, once packed) are
// unmapped when it frees them. No mlock: the process may not be allowed to lock a
// large program, and paging it is the kernel's choice.
Result<executorch::extension::MmapDataLoader> MapFile(const std::string& path) {
  return executorch::extension::MmapDataLoader::from(
      path.c_str(), executorch::extension::MmapDataLoader::MlockConfig::NoMlock);
}

}  // namespace

LoadedProgram::LoadedProgram()
    : method_allocator_(std::make_unique<executorch::extension::MallocMemoryAllocator>()),
      temp_allocator_(std::make_unique<executorch::extension::MallocMemoryAllocator>()) {}

LoadedProgram::~LoadedProgram() = default;

Result<std::unique_ptr<LoadedProgram>> LoadedProgram::LoadFile(
    const std::string& path, const std::vector<std::string>& methods, std::string* error,
    const std::string& data_path) {
  std::unique_ptr<LoadedProgram> p(new LoadedProgram());
  Result<executorch::extension::MmapDataLoader> loader = MapFile(path);
  if (!loader.ok()) {
    *error = path + ": cannot open the file (error " + ErrorText(loader.error()) + ")";
    return loader.error();
  }
  p->loader_ = std::make_unique<executorch::extension::MmapDataLoader>(std::move(loader.get()));
  const Error err = p->Init(path, methods, data_path, error);
  if (err != Error::Ok) {
    return err;
  }
  return p;
}

Result<std::unique_ptr<LoadedProgram>> LoadedProgram::LoadBytes(
    std::vector<uint8_t> bytes, const std::string& what, const std::vector<std::string>& methods,
    std::string* error, const std::string& data_path) {
  std::unique_ptr<LoadedProgram> p(new LoadedProgram());
  p->bytes_ = std::move(bytes);
  p->loader_ =
      std::make_unique<executorch::extension::BufferDataLoader>(p->bytes_.data(), p->bytes_.size());
  const Error err = p->Init(what, methods, data_path, error);
  if (err != Error::Ok) {
    return err;
  }
  return p;
}

Error LoadedProgram::Init(const std::string& what, const std::vector<std::string>& methods,
                          const std::string& data_path, std::string* error) {
  if (!data_path.empty()) {
    Result<executorch::extension::MmapDataLoader> data_loader = MapFile(data_path);
    if (!data_loader.ok()) {
      *error =
          data_path + ": cannot open the data file (error " + ErrorText(data_loader.error()) + ")";
      return data_loader.error();
    }
    data_loader_ =
        std::make_unique<executorch::extension::MmapDataLoader>(std::move(data_loader.get()));
    Result<executorch::extension::FlatTensorDataMap> data_map =
        executorch::extension::FlatTensorDataMap::load(data_loader_.get());
    if (!data_map.ok()) {
      *error = data_path +
               (HasFileIdentifier(*data_loader_, "FT01")
                    ? ": a damaged or truncated ExecuTorch data file (.ptd) (error " +
                          ErrorText(data_map.error()) + "); write it again with the .pte"
                    : ": not an ExecuTorch data file (.ptd) (error " + ErrorText(data_map.error()) +
                          "); pass the .ptd written with the .pte");
      return data_map.error();
    }
    data_map_ =
        std::make_unique<executorch::extension::FlatTensorDataMap>(std::move(data_map.get()));
    data_path_ = data_path;
  }
  Result<executorch::runtime::Program> program = executorch::runtime::Program::load(
      loader_.get(), executorch::runtime::Program::Verification::InternalConsistency);
  if (!program.ok()) {
    *error = what + (HasFileIdentifier(*loader_, "BP08")
                         ? ": a bundled program (.bpte, a program with test cases from "
                           "ExecuTorch's devtools), not a program; load the .pte it was made "
                           "from"
                         : ": not a loadable ExecuTorch program (error " +
                               ErrorText(program.error()) + "); re-export it");
    return program.error();
  }
  program_ = std::make_unique<executorch::runtime::Program>(std::move(program.get()));
  const Error delegates = CheckDelegateEntries(what, error);
  if (delegates != Error::Ok) {
    return delegates;
  }
  if (methods.empty()) {
    for (size_t i = 0; i < program_->num_methods(); ++i) {
      Result<const char*> name = program_->get_method_name(i);
      if (!name.ok()) {
        *error = what + ": cannot read the name of method " + std::to_string(i);
        return name.error();
      }
      method_names_.emplace_back(name.get());
    }
  } else {
    method_names_ = methods;
  }
  methods_.reserve(method_names_.size());
  for (const std::string& name : method_names_) {
    const Error err = LoadIntoSharedArenas(name);
    if (err != Error::Ok) {
      if (err == Error::NotFound || err == Error::InvalidExternalData) {
        // A delegate did not find a weight by its key, or found data that does not fit it
        // (it logged the key; XNNPACK's weight cache reports a missing key as
        // InvalidExternalData): the program keeps its weights in a data file
        // (external_weights=True) that is missing or another program's.
        *error = what + ": cannot load method '" + name +
                 "': a weight it needs is missing from (or does not fit) the "
                 "program" +
                 (data_path_.empty()
                      ? std::string(" and no data file was given; pass the .ptd written with it")
                      : " nor in " + data_path_ + "; check that it was written with this program") +
                 " (the missing key is in the log above)";
      } else if (err == Error::OperatorMissing) {
        *error = what + ": cannot load method '" + name + "' (error " + ErrorText(err) +
                 "): it calls an operator no kernel is registered for in this runtime (ExecuTorch "
                 "logs its name); register that kernel, or export the model without the "
                 "operation";
      } else {
        *error = what + ": cannot load method '" + name + "' (error " + ErrorText(err) +
                 "): the program has no such method, or a delegate in it failed to initialise "
                 "(see the log above; a corrupted blob is rejected here)";
      }
      return err;
    }
    const Error io = CheckMethodIo(what, methods_.back(), error);
    if (io != Error::Ok) {
      return io;
    }
  }
  return CollectBuffers(what, error);
}

Error LoadedProgram::CheckDelegateEntries(const std::string& what, std::string* error) {
  using executorch::runtime::DataLoader;
  Result<size_t> size = loader_->size();
  if (!size.ok()) {
    return size.error();
  }
  Result<executorch::runtime::FreeableBuffer> bytes =
      loader_->load(0, size.get(), DataLoader::SegmentInfo(DataLoader::SegmentInfo::Type::Program));
  if (!bytes.ok()) {
    return bytes.error();
  }
  std::string problem;
  const Error err = CheckProgramDelegates(bytes->data(), bytes->size(), &problem);
  if (err != Error::Ok) {
    *error = what + ": " + problem + "; the program is corrupt: re-export it";
  }
  return err;
}

// Method::init does not check that the execution plan's input and output value indices lie in
// its value table; set_input and get_output then abort on one that does not (a corrupted
// .pte). MethodMeta's tags check the range, so a bad index is refused here, at load.
Error LoadedProgram::CheckMethodIo(const std::string& what, const LoadedMethod& m,
                                   std::string* error) {
  const MethodMeta meta = m.method->method_meta();
  auto check = [&](const char* kind, size_t index, Result<executorch::runtime::Tag> tag) {
    if (!tag.ok()) {
      *error = what + ": cannot load method '" + m.name + "': its " + kind + " " +
               std::to_string(index) + " refers to no value of the method (error " +
               ErrorText(tag.error()) + "); the program is corrupt: re-export it";
    }
    return tag.ok();
  };
  for (size_t i = 0; i < m.method->inputs_size(); ++i) {
    if (!check("input", i, meta.input_tag(i))) return Error::InvalidProgram;
  }
  for (size_t i = 0; i < m.method->outputs_size(); ++i) {
    if (!check("output", i, meta.output_tag(i))) return Error::InvalidProgram;
  }
  return Error::Ok;
}

Error LoadedProgram::AllocateSharedArenas() {
  std::vector<size_t> sizes;
  for (size_t m = 0; m < program_->num_methods(); ++m) {
    Result<const char*> name = program_->get_method_name(m);
    if (!name.ok()) {
      return name.error();
    }
    Result<MethodMeta> meta = program_->method_meta(name.get());
    if (!meta.ok()) {
      return meta.error();
    }
    const size_t shared = std::min(meta->num_memory_planned_buffers(), kSharedPlannedBuffers);
    sizes.resize(std::max(sizes.size(), shared), 0);
    for (size_t i = 0; i < shared; ++i) {
      Result<int64_t> size = meta->memory_planned_buffer_size(i);
      if (!size.ok()) {
        return size.error();
      }
      if (size.get() < 0) {
        return Error::InvalidProgram;
      }
      sizes[i] = std::max(sizes[i], static_cast<size_t>(size.get()));
    }
  }
  for (size_t size : sizes) {
    shared_arenas_.emplace_back(size);  // zeroed
  }
  return Error::Ok;
}

Error LoadedProgram::LoadIntoSharedArenas(const std::string& name) {
  Result<MethodMeta> meta = program_->method_meta(name.c_str());
  if (!meta.ok()) {
    return meta.error();
  }
  if (shared_arenas_.empty()) {
    const Error err = AllocateSharedArenas();
    if (err != Error::Ok) {
      return err;
    }
  }
  methods_.emplace_back();
  LoadedMethod& m = methods_.back();
  m.name = name;
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    Result<int64_t> size = meta->memory_planned_buffer_size(i);
    if (!size.ok()) {
      return size.error();
    }
    if (size.get() < 0) {
      return Error::InvalidProgram;
    }
    if (i < shared_arenas_.size()) {
      m.planned_spans.emplace_back(shared_arenas_[i].data(), shared_arenas_[i].size());
    } else {
      m.own_buffers.emplace_back(static_cast<size_t>(size.get()));  // zeroed
      m.planned_spans.emplace_back(m.own_buffers.back().data(), m.own_buffers.back().size());
    }
  }
  m.planned_memory = std::make_unique<executorch::runtime::HierarchicalAllocator>(
      Span<Span<uint8_t>>(m.planned_spans.data(), m.planned_spans.size()));
  m.memory_manager = std::make_unique<executorch::runtime::MemoryManager>(
      method_allocator_.get(), m.planned_memory.get(), temp_allocator_.get());
  Result<executorch::runtime::Method> method = program_->load_method(
      name.c_str(), m.memory_manager.get(), /*event_tracer=*/nullptr, data_map_.get());
  if (!method.ok()) {
    return method.error();
  }
  m.method = std::make_unique<executorch::runtime::Method>(std::move(method.get()));
  return Error::Ok;
}

Error LoadedProgram::CollectBuffers(const std::string& what, std::string* error) {
  for (size_t m = 0; m < methods_.size(); ++m) {
    const MethodMeta meta = methods_[m].method->method_meta();
    for (size_t i = 0; i < meta.num_attributes(); ++i) {
      Result<executorch::runtime::TensorInfo> info = meta.attribute_tensor_meta(i);
      if (!info.ok()) {
        *error = what + ": cannot read attribute " + std::to_string(i) + " of method '" +
                 methods_[m].name + "'";
        return info.error();
      }
      NamedBuffer buffer;
      buffer.name = std::string(info->name());
      buffer.dtype = info->scalar_type();
      buffer.sizes.assign(info->sizes().begin(), info->sizes().end());
      buffer.nbytes = info->nbytes();
      buffer.methods.push_back(m);
      auto known = std::find_if(buffers_.begin(), buffers_.end(),
                                [&](const NamedBuffer& b) { return b.name == buffer.name; });
      if (known == buffers_.end()) {
        buffers_.push_back(std::move(buffer));
        continue;
      }
      if (known->dtype != buffer.dtype || known->sizes != buffer.sizes) {
        *error = what + ": buffer '" + buffer.name + "' is " +
                 SpecString(known->dtype, known->sizes) + " in method '" +
                 methods_[known->methods.front()].name + "' but " +
                 SpecString(buffer.dtype, buffer.sizes) + " in method '" + methods_[m].name +
                 "'; one name must be one buffer";
        return Error::InvalidProgram;
      }
      known->methods.push_back(m);
    }
  }
  for (const NamedBuffer& buffer : buffers_) {
    const uint8_t* data = static_cast<const uint8_t*>(buffer_data(buffer.name));
    const bool zero = data == nullptr ||
                      std::all_of(data, data + buffer.nbytes, [](uint8_t b) { return b == 0; });
    initial_values_.push_back(zero ? std::vector<uint8_t>()
                                   : std::vector<uint8_t>(data, data + buffer.nbytes));
  }
  return Error::Ok;
}

executorch::runtime::Method* LoadedProgram::method(std::string_view name) {
  for (LoadedMethod& m : methods_) {
    if (m.name == name) {
      return m.method.get();
    }
  }
  return nullptr;
}

const NamedBuffer* LoadedProgram::find_buffer(std::string_view name) const {
  for (const NamedBuffer& b : buffers_) {
    if (b.name == name) {
      return &b;
    }
  }
  return nullptr;
}

Result<Tensor> LoadedProgram::buffer_tensor(size_t method_index, std::string_view name) {
  if (method_index >= methods_.size()) {
    return Error::NotFound;
  }
  return methods_[method_index].method->get_attribute(name);
}

void* LoadedProgram::buffer_data(std::string_view name) {
  const NamedBuffer* buffer = find_buffer(name);
  if (buffer == nullptr) {
    return nullptr;
  }
  Result<Tensor> t = buffer_tensor(buffer->methods.front(), name);
  return t.ok() ? t->mutable_data_ptr() : nullptr;
}

const std::vector<uint8_t>& LoadedProgram::initial_value(std::string_view name) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].name == name) {
      return initial_values_[i];
    }
  }
  return NoBytes();
}

Error LoadedProgram::BindBuffer(std::string_view name, void* data, size_t nbytes,
                                std::string* error) {
  return BindBuffers({BufferBinding{std::string(name), data, nbytes}}, error);
}

Error LoadedProgram::BindBuffers(const std::vector<BufferBinding>& bindings, std::string* error) {
  const Error checked = CheckBindings(bindings, error);
  if (checked != Error::Ok) {
    return checked;
  }
  for (const BufferBinding& b : bindings) {
    for (size_t m : find_buffer(b.name)->methods) {
      Result<Tensor> t = buffer_tensor(m, b.name);
      Error err = t.error();
      if (t.ok()) {
        err = executorch::runtime::internal::set_tensor_data(t.get(), b.data, b.nbytes);
      }
      if (err != Error::Ok) {
        *error = "binding buffer '" + b.name + "' in method '" + methods_[m].name +
                 "' failed (error " + ErrorText(err) + ")";
        return err;
      }
    }
  }
  return Error::Ok;
}

Error LoadedProgram::CheckBindings(const std::vector<BufferBinding>& bindings, std::string* error) {
  std::unordered_map<std::string_view, const BufferBinding*> by_name;  // one per name
  for (const BufferBinding& b : bindings) {
    const NamedBuffer* buffer = find_buffer(b.name);
    if (buffer == nullptr) {
      *error = UnknownBufferMessage(b.name);
      return Error::NotFound;
    }
    if (b.nbytes != buffer->nbytes) {
      *error = "binding buffer '" + buffer->name + "': " + std::to_string(b.nbytes) +
               " bytes given for " + std::to_string(buffer->nbytes) + " (" +
               SpecString(buffer->dtype, buffer->sizes) + ")";
      return Error::InvalidArgument;
    }
    if (b.data == nullptr && b.nbytes > 0) {
      *error = "binding buffer '" + buffer->name + "': null memory for " +
               std::to_string(b.nbytes) + " bytes; pass memory you own";
      return Error::InvalidArgument;
    }
    if (reinterpret_cast<uintptr_t>(b.data) > UINTPTR_MAX - b.nbytes) {
      *error = "binding buffer '" + buffer->name + "': " + std::to_string(b.nbytes) +
               " bytes at that address pass the end of the address space; not real memory";
      return Error::InvalidArgument;
    }
    const auto [it, first] = by_name.emplace(b.name, &b);
    if (!first && it->second->data != b.data) {
      *error = "binding buffer '" + buffer->name +
               "' twice in one call, to different memory: only one would be used; bind each "
               "buffer once";
      return Error::InvalidArgument;
    }
  }
  // Each buffer's storage once `bindings` are applied: the new memory for the buffers bound
  // now, the current storage for the others.
  struct Range {
    const std::string* name;
    uintptr_t begin;
    uintptr_t end;
    bool is_new;
  };
  std::vector<Range> ranges;
  for (const NamedBuffer& buffer : buffers_) {
    const auto it = by_name.find(buffer.name);
    const BufferBinding* bound = it != by_name.end() ? it->second : nullptr;
    const auto begin =
        reinterpret_cast<uintptr_t>(bound != nullptr ? bound->data : buffer_data(buffer.name));
    if (begin == 0 || buffer.nbytes == 0) {
      continue;  // no storage yet (alloc_mutable_buffers=False), or nothing to share
    }
    ranges.push_back({&buffer.name, begin, begin + buffer.nbytes, bound != nullptr});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Sorted by start, range j > i overlaps range i iff it starts before i ends. Only pairs with
  // a new binding are errors: the program's own storage is whatever its memory plan made it.
  for (size_t i = 0; i < ranges.size(); ++i) {
    for (size_t j = i + 1; j < ranges.size() && ranges[j].begin < ranges[i].end; ++j) {
      if (!ranges[i].is_new && !ranges[j].is_new) {
        continue;
      }
      const Range& a = ranges[i].is_new ? ranges[i] : ranges[j];
      const Range& b = ranges[i].is_new ? ranges[j] : ranges[i];
      *error = "cannot bind buffer '" + *a.name + "': its memory overlaps buffer '" + *b.name +
               "'" + (b.is_new ? " (bound in the same call)" : " (its current storage)") +
               ": two buffers in one memory would overwrite each other. Bind each buffer "
               "memory of its own; disjoint parts of one allocation are fine";
      return Error::InvalidArgument;
    }
  }
  return Error::Ok;
}

std::string LoadedProgram::BufferNameList() const {
  std::string names;
  for (const NamedBuffer& b : buffers_) {
    names += (names.empty() ? "'" : ", '") + b.name + "'";
  }
  return names.empty() ? "none" : names;
}

std::string LoadedProgram::UnknownBufferMessage(std::string_view name) const {
  return "no mutable buffer named '" + std::string(name) +
         "'; the program's named buffers are: " + BufferNameList();
}

bool InputIsDynamic(const executorch::runtime::Method& method, size_t i) {
  // get_input is deprecated in favour of MethodMeta, which cannot answer this; the value is
  // only read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const executorch::runtime::EValue& value = method.get_input(i);
#pragma GCC diagnostic pop
  return value.isTensor() &&
         value.toTensor().shape_dynamism() != executorch::runtime::TensorShapeDynamism::STATIC;
}

}  // namespace executorch_trt::extension
