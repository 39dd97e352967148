// Copyright (c) executorch-trt authors.
//
// loaded_program.h: an ExecuTorch program loaded with its methods in shared memory arenas,
// whose named mutable buffers (KV caches, counters) the caller can read, write and own.
//
// Load() uses ExecuTorch's Program and Method directly (Module keeps its Methods to itself).
// It loads the methods into shared memory arenas the way
// `Module(path, ..., share_memory_arenas=true)` does: planned buffers 0 and 1 (mem_id 1,
// activations; mem_id 2, mutable buffers) are sized to the largest method of the program and
// shared, any other planned buffer is the method's own, all zeroed. So methods exported
// together with `share_mutable_buffers=True` (executorch_trt.export's default) see one copy of
// each buffer: prefill writes the cache that decode reads. All methods are loaded by Load(),
// before anything runs: loading a method re-initialises the program's shared mutable buffers,
// so a method loaded later would reset the state.
//
// Buffers are found by name (`Method::get_attribute`), which needs a program exported with
// `emit_mutable_buffer_names=True` (executorch_trt.export's default). BindBuffer() points a
// buffer of every method at memory the caller owns
// (`executorch::runtime::internal::set_tensor_data`); the delegate then updates that memory
// in place. Rebinding per conversation gives any number of isolated sessions on one loaded
// program.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "core/common/runtime_types.h"

namespace executorch_trt::extension {

// Whether input `i` of `method` is a tensor of dynamic shape. MethodMeta's sizes of such an
// input are its upper bound and ExecuTorch 1.5.1's MethodMeta does not say it is one; the
// method's input tensor does (TensorImpl::shape_dynamism).
bool InputIsDynamic(const executorch::runtime::Method& method, size_t i);

// A named mutable buffer of the program, as its methods declare it.
struct NamedBuffer {
  std::string name;  // the buffer's FQN, e.g. "key_cache_0"
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> sizes;
  size_t nbytes = 0;
  // The methods that have it (indices into LoadedProgram::method_names()).
  std::vector<size_t> methods;
};

// One buffer's new storage: `nbytes` bytes at `data`, the caller's (LoadedProgram::BindBuffers).
struct BufferBinding {
  std::string name;
  void* data = nullptr;
  size_t nbytes = 0;
};

// A program with every requested method loaded into shared arenas.
//
// Ownership: the object owns the program's bytes or file, the Program, the arenas and the
// Methods; the tensors it hands out belong to it and stay valid for its lifetime. Memory bound
// with BindBuffer() stays the caller's: the object never frees it, and it must outlive every
// execute of any method until other memory is bound or the object is destroyed.
//
// Thread-safety: none. Use one object from one thread at a time (its methods share arenas).
// Separate objects share nothing and may run concurrently.
class LoadedProgram {
 public:
  // Loads the program in the file at `path` (memory-mapped: MmapDataLoader, no mlock) or in `bytes`
  // (the object keeps them), with full flatbuffer verification (a corrupted program is rejected,
  // never run), then `methods` (all of the program's methods when empty) into shared arenas, in the
  // order given (all: the program's order).
  //
  // On failure returns the ExecuTorch error and sets *error to a message naming `what` (the
  // path, or how the caller describes the bytes) and the problem:
  //   - not a loadable ExecuTorch program (the data loader's or Program::load's error);
  //   - a method that is missing or does not load, e.g. a delegate rejects its blob (ExecuTorch
  //     has logged the reason);
  //   - a buffer two methods declare with different dtypes or shapes (Error::InvalidProgram);
  //   - `data_path` given but not a readable .ptd (the data loader's or FlatTensorDataMap's
  //     error, naming the file).
  //
  // `data_path` (empty: none) is the program's external data file (.ptd, ExecuTorch's
  // FlatTensor format), e.g. what executorch_trt.export(..., external_weights=True) leaves
  // outside the .pte (ExecutorchProgramManager.write_tensor_data_to_file). Every method is
  // loaded with it as its external NamedDataMap, so a delegate finds its weights by key there.
  // A method whose data is in neither the program nor the file fails to load (the delegate
  // logs the missing key; the message says to pass, or check, the data file).
  static Result<std::unique_ptr<LoadedProgram>> LoadFile(const std::string& path,
                                                         const std::vector<std::string>& methods,
                                                         std::string* error,
                                                         const std::string& data_path = "");
  static Result<std::unique_ptr<LoadedProgram>> LoadBytes(std::vector<uint8_t> bytes,
                                                          const std::string& what,
                                                          const std::vector<std::string>& methods,
                                                          std::string* error,
                                                          const std::string& data_path = "");

  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;
  ~LoadedProgram();

  // The loaded methods, in load order.
  const std::vector<std::string>& method_names() const { return method_names_; }

  // The loaded method `name`, or nullptr when it was not loaded (or the program has none).
  executorch::runtime::Method* method(std::string_view name);

  // Every named mutable buffer of the loaded methods, in the order the methods declare them
  // (first method first; a buffer shared by several methods once). Empty when the program was
  // exported without `emit_mutable_buffer_names=True` (or has no mutable buffers).
  const std::vector<NamedBuffer>& buffers() const { return buffers_; }

  // The buffer named `name`, or nullptr.
  const NamedBuffer* find_buffer(std::string_view name) const;

  // The buffer's tensor in method `method_index` (one of NamedBuffer::methods); its data
  // pointer is the arena's storage until BindBuffer(), then the memory last bound. Error::NotFound
  // when that method has no such buffer.
  Result<Tensor> buffer_tensor(size_t method_index, std::string_view name);

  // The buffer's storage now: the arena's (null when the program does not allocate it:
  // `alloc_mutable_buffers=False`) until BindBuffer(), then the memory last bound. nullptr for
  // an unknown name.
  void* buffer_data(std::string_view name);

  // The buffer's value right after Load(), before any method ran: `nbytes` bytes, or empty when
  // it was all zeros (or had no storage, which a fresh conversation starts as zeros too).
  const std::vector<uint8_t>& initial_value(std::string_view name) const;

  // Points each buffer of `bindings` in every method that has it at the binding's memory (the
  // caller's, its contents used as they are).
  // Checks every binding first, and on these errors binds nothing (*error names the buffer):
  //   - an unknown name (Error::NotFound, listing the names);
  //   - `nbytes` different from the buffer's, null `data`, a range past the end of the address
  //     space, or one name given twice with different memory (Error::InvalidArgument);
  //   - memory overlapping another buffer's once `bindings` are applied, bound in the same call
  //     or already (Error::InvalidArgument naming both): the two would overwrite each other
  //     through the delegate's in-place updates, giving wrong numbers without an error.
  //     Disjoint parts of one allocation are fine. To exchange two buffers' memory, bind
  //     both in one call.
  // set_tensor_data's error (after the checks) leaves the buffer bound in some methods only:
  // bind it again before the next execute.
  Error BindBuffers(const std::vector<BufferBinding>& bindings, std::string* error);

  // BindBuffers() with one binding.
  Error BindBuffer(std::string_view name, void* data, size_t nbytes, std::string* error);

  // "'a', 'b'" (the buffer names, quoted) or "none".
  std::string BufferNameList() const;

  // The error for a name find_buffer() does not know: "no mutable buffer named '<name>'; the
  // program's named buffers are: <BufferNameList()>".
  std::string UnknownBufferMessage(std::string_view name) const;

 private:
  // One loaded method and the memory it was loaded into.
  struct LoadedMethod {
    std::string name;
    std::vector<std::vector<uint8_t>> own_buffers;  // planned buffers not shared
    std::vector<Span<uint8_t>> planned_spans;
    std::unique_ptr<executorch::runtime::HierarchicalAllocator> planned_memory;
    std::unique_ptr<executorch::runtime::MemoryManager> memory_manager;
    std::unique_ptr<executorch::runtime::Method> method;
  };

  LoadedProgram();

  // Opens `data_path` (if any) as data_map_, Program::load over loader_, then loads the
  // methods; *error names `what` (or the data file).
  Error Init(const std::string& what, const std::vector<std::string>& methods,
             const std::string& data_path, std::string* error);
  // Sizes and allocates shared_arenas_ from every method's planned buffers.
  Error AllocateSharedArenas();
  // Loads method `name` into shared_arenas_ as methods_.back().
  Error LoadIntoSharedArenas(const std::string& name);
  // Refuses a program with a delegate entry ExecuTorch's method loader would crash on (a
  // corrupt .pte: core/schema/compile_specs.h).
  Error CheckDelegateEntries(const std::string& what, std::string* error);
  // Refuses a method whose inputs or outputs name values it does not have (a corrupt .pte).
  Error CheckMethodIo(const std::string& what, const LoadedMethod& m, std::string* error);
  // Collects buffers_ from the loaded methods and records their initial values.
  Error CollectBuffers(const std::string& what, std::string* error);
  // BindBuffers()'s checks: every name known, every size right, no two buffers' memory
  // overlapping once `bindings` are applied.
  Error CheckBindings(const std::vector<BufferBinding>& bindings, std::string* error);

  // Declaration order is destruction order in reverse: the Methods go first, then the memory
  // they were loaded into, then the Program and its data.
  std::vector<uint8_t> bytes_;
  std::unique_ptr<executorch::runtime::DataLoader> loader_;
  std::unique_ptr<executorch::runtime::DataLoader> data_loader_;  // the .ptd, if any
  std::unique_ptr<executorch::runtime::NamedDataMap> data_map_;   // over data_loader_
  std::string data_path_;
  std::unique_ptr<executorch::runtime::Program> program_;
  std::unique_ptr<executorch::runtime::MemoryAllocator> method_allocator_;
  std::unique_ptr<executorch::runtime::MemoryAllocator> temp_allocator_;
  std::vector<std::vector<uint8_t>> shared_arenas_;
  std::vector<std::string> method_names_;
  std::vector<LoadedMethod> methods_;
  std::vector<NamedBuffer> buffers_;
  std::vector<std::vector<uint8_t>> initial_values_;  // by buffers_ index
};

}  // namespace executorch_trt::extension
