// Copyright (c) executorch-trt authors.
//
// nested_delegate_checks.cpp: see nested_delegate_checks.h. Both flatbuffers are read with the
// code flatc generates from the pinned wheel's schemas (//core/schema).

#include "core/engine/portable/nested_delegate_checks.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <executorch/runtime/platform/log.h>

// libexecutorch.so and libexecutorch_backend_xnnpack.so export the inline functions of their
// own FlatBuffers release and generated code under the same names: hidden, each side binds to
// its own (as in nested_program_checks.cpp).
#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/common/little_endian.h"
#include "core/schema/program_generated.h"
#include "core/schema/runtime_schema_generated.h"
#pragma GCC visibility pop

namespace executorch_trt {
namespace {

namespace fb = executorch_flatbuffer;
namespace xfb = fb_xnnpack;
using executorch::runtime::Error;

constexpr const char* kCorrupt = "the nested program is corrupt; re-export";

// Bits per element of an XNNPACK datatype, or 0 if unknown (then the tensor is not checked).
uint32_t ElementBits(xfb::XNNDatatype type) {
  switch (type) {
    case xfb::XNNDatatype::xnn_datatype_fp32:
    case xfb::XNNDatatype::xnn_datatype_qint32:
    case xfb::XNNDatatype::xnn_datatype_qcint32:
    case xfb::XNNDatatype::xnn_datatype_int32:
    case xfb::XNNDatatype::xnn_datatype_pfp32:
      return 32;
    case xfb::XNNDatatype::xnn_datatype_fp16:
    case xfb::XNNDatatype::xnn_datatype_bf16:
      return 16;
    case xfb::XNNDatatype::xnn_datatype_qint8:
    case xfb::XNNDatatype::xnn_datatype_quint8:
    case xfb::XNNDatatype::xnn_datatype_qcint8:
    case xfb::XNNDatatype::xnn_datatype_qdint8:
      return 8;
    case xfb::XNNDatatype::xnn_datatype_qcint4:
    case xfb::XNNDatatype::xnn_datatype_qbint4:
      return 4;
    default:
      return 0;
  }
}

// XNNPACK's payload header (ExecuTorch backends/xnnpack/runtime/XNNHeader.h): 4 bytes, magic
// "XH00" at 4, u16 header size at 8, u32 flatbuffer offset at 10 and size at 14, u32 constant
// data offset at 18, u64 constant data size at 22.
constexpr size_t kHeaderMinSize = 30;

class DelegateChecker {
 public:
  DelegateChecker(const char* method, uint32_t delegate,
                  const executorch::runtime::NamedDataMap* named_data)
      : method_(method), delegate_(delegate), named_data_(named_data) {}

  Error Check(const uint8_t* payload, size_t size) {
    const uint8_t* graph = payload;
    size_t graph_size = size;
    if (size >= kHeaderMinSize && std::memcmp(payload + 4, "XH00", 4) == 0) {
      const uint64_t fb_offset = ReadU32(payload + 10), fb_size = ReadU32(payload + 14);
      const uint64_t constant_offset = ReadU32(payload + 18);
      const uint64_t constant_size = ReadU64(payload + 22);
      if (fb_offset > size || fb_size > size - fb_offset || constant_offset > size ||
          constant_size > size - constant_offset) {
        return Fail("its header's sections lie outside its payload", -1, size);
      }
      graph = payload + fb_offset;
      graph_size = fb_size;
      constants_size_ = constant_size;
    }
    if (graph_size < 8 ||
        (std::memcmp(graph + 4, "XN00", 4) != 0 && std::memcmp(graph + 4, "XN01", 4) != 0)) {
      return Fail("its graph is not an XNNGraph flatbuffer", -1, graph_size);
    }
    // The verifier and the accessors load scalars in place: an aligned copy if need be.
    std::unique_ptr<std::max_align_t[]> aligned;
    if (reinterpret_cast<uintptr_t>(graph) % alignof(std::max_align_t) != 0) {
      aligned.reset(new (std::nothrow)
                        std::max_align_t[(graph_size + sizeof(std::max_align_t) - 1) /
                                         sizeof(std::max_align_t)]);
      if (aligned == nullptr) return Error::MemoryAllocationFailed;
      std::memcpy(aligned.get(), graph, graph_size);
      graph = reinterpret_cast<const uint8_t*>(aligned.get());
    }
    flatbuffers::Verifier verifier(graph, graph_size);
    if (!verifier.VerifyBuffer<xfb::XNNGraph>(nullptr)) {
      return Fail("its XNNGraph fails flatbuffer verification", -1, graph_size);
    }
    const xfb::XNNGraph* g = flatbuffers::GetRoot<xfb::XNNGraph>(graph);
    for (uint32_t i = 0; g->xvalues() != nullptr && i < g->xvalues()->size(); ++i) {
      const xfb::XNNTensorValue* t = g->xvalues()->Get(i)->xvalue_union_as_XNNTensorValue();
      if (t == nullptr) {
        // The quantized tensor value wraps one.
        const auto* q = g->xvalues()->Get(i)->xvalue_union_as_XNNQuantizedTensorValue();
        t = q == nullptr ? nullptr : q->tensor_value();
      }
      if (t == nullptr || t->constant_buffer_idx() == 0) continue;
      Error err = CheckConstant(*g, *t, i);
      if (err != Error::Ok) return err;
    }
    return Error::Ok;
  }

 private:
  Error Fail(const char* what, int64_t value, uint64_t bytes) {
    ET_LOG(Error,
           "executorch_trt: nested method '%s': XNNPACK delegate %" PRIu32 ": %s (value %" PRId64
           ", %" PRIu64 " bytes); %s.",
           method_, delegate_, what, value, bytes, kCorrupt);
    return Error::InvalidProgram;
  }

  Error CheckConstant(const xfb::XNNGraph& g, const xfb::XNNTensorValue& t, uint32_t value) {
    const uint32_t bits = ElementBits(t.datatype());
    if (bits == 0) return Error::Ok;
    uint64_t elements = 1;
    std::string dims;
    for (uint32_t d = 0; t.dims() != nullptr && d < t.dims()->size(); ++d) {
      dims += (d == 0 ? "" : ", ") + std::to_string(t.dims()->Get(d));
      if (__builtin_mul_overflow(elements, uint64_t{t.dims()->Get(d)}, &elements) ||
          elements > (uint64_t{1} << 56)) {
        return Fail("a constant tensor's element count overflows", value, 0);
      }
    }
    const uint64_t needed = (elements * bits + 7) / 8;
    const uint32_t idx = t.constant_buffer_idx();
    uint64_t available = 0;
    if (g.constant_data() != nullptr) {
      if (idx >= g.constant_data()->size()) return Error::Ok;  // XNNCompiler rejects it
      const xfb::ConstantDataOffset* c = g.constant_data()->Get(idx);
      if (c->named_key() != nullptr && c->named_key()->size() > 0) {
        if (named_data_ == nullptr) return Error::Ok;
        auto buffer = named_data_->get_data(c->named_key()->c_str());
        if (!buffer.ok()) return Error::Ok;  // XNNCompiler fails to load it, cleanly
        available = buffer->size();
        buffer->Free();
      } else {
        if (c->offset() > constants_size_) {
          return Fail("a constant lies outside the constant section", value, c->offset());
        }
        available = std::min<uint64_t>(c->size(), constants_size_ - c->offset());
      }
    } else if (g.constant_buffer() != nullptr && idx < g.constant_buffer()->size()) {
      const auto* storage = g.constant_buffer()->Get(idx)->storage();
      available = storage == nullptr ? 0 : storage->size();
    } else {
      return Error::Ok;  // XNNCompiler rejects it
    }
    if (needed > available) {
      ET_LOG(Error,
             "executorch_trt: nested method '%s': XNNPACK delegate %" PRIu32
             ": constant tensor value %" PRIu32 " has dims [%s] (%" PRIu64
             " bytes) but its data is %" PRIu64 " bytes; %s.",
             method_, delegate_, value, dims.c_str(), needed, available, kCorrupt);
      return Error::InvalidProgram;
    }
    return Error::Ok;
  }

  const char* method_;
  const uint32_t delegate_;
  const executorch::runtime::NamedDataMap* named_data_;
  uint64_t constants_size_ = 0;
};

}  // namespace

Error CheckNestedXnnpackDelegates(const void* data, size_t size, const char* method_name,
                                  const executorch::runtime::NamedDataMap* named_data) {
  // CheckNestedProgram verified this buffer; the engine keeps it 16-byte aligned.
  if (data == nullptr || size < 8 ||
      reinterpret_cast<uintptr_t>(data) % alignof(std::max_align_t) != 0) {
    return Error::InvalidArgument;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  flatbuffers::Verifier verifier(bytes, std::min<size_t>(size, FLATBUFFERS_MAX_BUFFER_SIZE - 1));
  if (!fb::VerifyProgramBuffer(verifier)) return Error::InvalidProgram;
  const fb::Program* program = fb::GetProgram(bytes);
  const fb::ExecutionPlan* plan = nullptr;
  for (uint32_t i = 0;
       program->execution_plan() != nullptr && i < program->execution_plan()->size(); ++i) {
    const fb::ExecutionPlan* p = program->execution_plan()->Get(i);
    if (p->name() != nullptr && p->name()->str() == method_name) plan = p;
  }
  if (plan == nullptr || plan->delegates() == nullptr) return Error::Ok;
  for (uint32_t d = 0; d < plan->delegates()->size(); ++d) {
    const fb::BackendDelegate* delegate = plan->delegates()->Get(d);
    if (delegate->id() == nullptr || delegate->id()->str() != "XnnpackBackend") continue;
    const fb::BackendDelegateDataReference* processed = delegate->processed();
    if (processed == nullptr) continue;  // ExecuTorch's loader rejects it
    const uint8_t* payload = nullptr;
    uint64_t payload_size = 0;
    if (processed->location() == fb::DataLocation::INLINE) {
      const auto* inline_data = program->backend_delegate_data();
      if (inline_data == nullptr || processed->index() >= inline_data->size()) continue;
      const auto* v = inline_data->Get(static_cast<uint32_t>(processed->index()))->data();
      if (v == nullptr) continue;
      payload = v->data();
      payload_size = v->size();
    } else {
      // A segment after the flatbuffer: the extended header ("eh00" at 8) gives the segments'
      // base offset (u64 at 24); each segment its offset and size from there.
      const auto* segments = program->segments();
      if (segments == nullptr || processed->index() >= segments->size() || size < 32 ||
          std::memcmp(bytes + 8, "eh00", 4) != 0) {
        continue;  // ExecuTorch's loader rejects it
      }
      const uint64_t base = ReadU64(bytes + 24);
      const fb::DataSegment* segment = segments->Get(static_cast<uint32_t>(processed->index()));
      uint64_t begin = 0;
      if (__builtin_add_overflow(base, segment->offset(), &begin) || begin > size ||
          segment->size() > size - begin) {
        continue;  // ExecuTorch's loader fails to load the segment, cleanly
      }
      payload = bytes + begin;
      payload_size = segment->size();
    }
    Error err = DelegateChecker(method_name, d, named_data).Check(payload, payload_size);
    if (err != Error::Ok) return err;
  }
  return Error::Ok;
}

}  // namespace executorch_trt
