// Copyright (c) executorch-trt authors.
//
// CheckNestedProgram (core/engine/portable/nested_program_checks.h): every nested program the
// exporter writes passes (the test blob's and every portable partition of the example programs,
// XNNPACK delegates included), and the nested programs of the inputs the fuzzers crashed or
// exhausted memory with (tests/fuzz/regressions/) are rejected before anything is loaded or run.

#include "core/engine/portable/nested_program_checks.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

// As in core/engine/portable/nested_program_checks.cpp: libexecutorch.so exports the same inline
// FlatBuffers functions; hidden, the test binds to its own.
#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/schema/program_generated.h"
#pragma GCC visibility pop

#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "core/engine/portable/nested_delegate_checks.h"
#include "core/engine/portable/operator_schemas.h"
#include "core/engine/portable/portable_payload.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
namespace fb = executorch_flatbuffer;

constexpr const char kMethod[] = "forward";

// The nested program of a portable payload.
std::vector<uint8_t> ProgramOfPayload(const uint8_t* payload, size_t size) {
  auto parsed = PortablePayload::Parse(payload, size);
  EXPECT_TRUE(parsed.ok()) << "not a portable payload";
  if (!parsed.ok()) return {};
  return std::vector<uint8_t>(parsed->program, parsed->program + parsed->program_size);
}

// The nested program of a blob written by MakeBlob / make_kv_testdata.py (metadata at 64,
// payload last), after recomputing its checksum as the backend fuzzer does.
std::vector<uint8_t> ProgramOfBlob(std::vector<uint8_t> blob) {
  testing::ResealBlob(&blob);
  auto header = BlobHeader::Parse(blob.data(), blob.size());
  EXPECT_TRUE(header.ok()) << "not a blob";
  if (!header.ok()) return {};
  return ProgramOfPayload(header->Payload(blob.data()), header->payload_size);
}

// The nested programs of every portable delegate blob embedded in a .pte (blobs are stored
// verbatim: found by their magic and a header that parses, checksum included).
std::vector<std::vector<uint8_t>> NestedProgramsIn(const std::vector<uint8_t>& pte) {
  std::vector<std::vector<uint8_t>> programs;
  for (size_t at = 0; at + kBlobMinHeaderSize <= pte.size(); ++at) {
    if (std::memcmp(pte.data() + at, kBlobMagic, sizeof(kBlobMagic)) != 0) continue;
    auto header = BlobHeader::Parse(pte.data() + at, pte.size() - at);
    if (!header.ok()) continue;
    auto metadata = DelegateMetadata::Parse(header->Metadata(pte.data() + at),
                                            header->required_features, header->format_version);
    if (!metadata.ok() || metadata->engine != EngineKind::kPortable) continue;
    programs.push_back(ProgramOfPayload(header->Payload(pte.data() + at), header->payload_size));
  }
  return programs;
}

// ExecuTorch's log lines since the test began (the checks' messages are asserted on).
std::string& Log() {
  static std::string log;
  return log;
}

void CaptureLogMessage(et_timestamp_t /*timestamp*/, et_pal_log_level_t /*level*/,
                       const char* /*filename*/, const char* /*function*/, size_t /*line*/,
                       const char* message, size_t length) {
  Log().append(message, length).append("\n");
  std::fwrite(message, 1, length, stderr);
  std::fputc('\n', stderr);
}

class NestedProgramChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const bool registered = [] {
      return executorch::runtime::register_pal(
          executorch::runtime::PalImpl::create(&CaptureLogMessage, __FILE__));
    }();
    ASSERT_TRUE(registered);
    executorch::runtime::runtime_init();
    Log().clear();
  }
};

TEST_F(NestedProgramChecksTest, AcceptsTheTestProgram) {
  const std::vector<uint8_t> pte = testing::ReadFile(testing::TestDataPath("nested_kv.pte"));
  ASSERT_FALSE(pte.empty());
  EXPECT_EQ(CheckNestedProgram(pte.data(), pte.size(), kMethod), Error::Ok);
  // The same program inside the real blob.
  const std::vector<uint8_t> from_blob =
      ProgramOfBlob(testing::ReadFile(testing::TestDataPath("kv_blob.bin")));
  EXPECT_EQ(from_blob, pte);
}

TEST_F(NestedProgramChecksTest, AcceptsEveryPartitionOfTheExamplePrograms) {
  for (const char* path : {"examples/kv_cache_decode.pte", "examples/cross_attn_decode.pte"}) {
    const std::vector<uint8_t> pte = testing::ReadFile(path);
    ASSERT_FALSE(pte.empty()) << "missing " << path;
    const std::vector<std::vector<uint8_t>> programs = NestedProgramsIn(pte);
    EXPECT_GE(programs.size(), 2u) << path << ": expected a partition per method";
    for (size_t i = 0; i < programs.size(); ++i) {
      EXPECT_EQ(CheckNestedProgram(programs[i].data(), programs[i].size(), kMethod), Error::Ok)
          << path << ", partition " << i;
      // Their XNNPACK delegates (in segments) too; with no named data, the weights stored
      // there by key are not compared (PortableEngine passes the program's named data).
      EXPECT_EQ(CheckNestedXnnpackDelegates(programs[i].data(), programs[i].size(), kMethod,
                                            /*named_data=*/nullptr),
                Error::Ok)
          << path << ", partition " << i;
    }
  }
}

TEST_F(NestedProgramChecksTest, RejectsAKernelCallPastTheOperatorTable) {
  // backend_fuzzer: one byte of instruction 4's op_index changed (3 -> 0x08000003); ExecuTorch
  // loaded the method and segfaulted calling the kernel at execute.
  const std::vector<uint8_t> program = ProgramOfBlob(
      testing::ReadFile("tests/fuzz/regressions/backend_fuzzer/op_index_past_operator_table.bin"));
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsAPlannedBufferNoTensorNeeds) {
  // portable_payload_fuzzer: a planned buffer size changed to 20 GiB, which the engine
  // allocated at init.
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/planned_buffer_of_20_gib.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsATensorWhoseStridesOverflowInt32) {
  // portable_payload_fuzzer: an input's sizes changed so that 581 * 1347699976 elements lie
  // behind its outer dimension; computing its contiguous strides overflowed int32 (UBSan).
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/strides_overflow_int32.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsAnInstructionWithoutItsArguments) {
  // portable_payload_fuzzer (against the first version of these checks): an instruction
  // whose union type says KernelCall but whose table is absent; reading it was a null
  // member call (UBSan).
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/kernel_call_without_table.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsMisalignedPlannedBufferSizes) {
  // portable_payload_fuzzer: the offset of the int64 buffer-size vector moved by 4 bytes;
  // flatbuffers' verifier accepts it (it aligns the length only) and reading it was a
  // misaligned load (UBSan), in the checks and in ExecuTorch's own MethodMeta alike.
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/misaligned_buffer_sizes.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsWhatIsNotAProgramWithThatMethod) {
  const std::vector<uint8_t> pte = testing::ReadFile(testing::TestDataPath("nested_kv.pte"));
  ASSERT_FALSE(pte.empty());
  EXPECT_EQ(CheckNestedProgram(pte.data(), pte.size(), "decode"), Error::InvalidProgram);
  EXPECT_EQ(CheckNestedProgram(nullptr, 0, kMethod), Error::InvalidProgram);
  const std::vector<uint8_t> garbage(64, 0x5a);
  EXPECT_EQ(CheckNestedProgram(garbage.data(), garbage.size(), kMethod), Error::InvalidProgram);
  // Truncated: the flatbuffer's tables reach past the end.
  EXPECT_EQ(CheckNestedProgram(pte.data(), pte.size() / 2, kMethod), Error::InvalidProgram);
  // Unaligned storage is handled (copied), not misread.
  std::vector<uint8_t> shifted(pte.size() + 1);
  std::memcpy(shifted.data() + 1, pte.data(), pte.size());
  EXPECT_EQ(CheckNestedProgram(shifted.data() + 1, pte.size(), kMethod), Error::Ok);
}

TEST_F(NestedProgramChecksTest, RejectsAKernelArgumentOfAnotherType) {
  // backend_fuzzer: a KernelCall of dim_order_ops::_to_dim_order_copy.out whose non_blocking
  // argument points at an IntList value; ExecuTorch's boxed kernel called EValue::toBool(),
  // whose ET_CHECK aborted the process at execute. The second input: an IntList item points at
  // a value that is not an Int; a kernel in libexecutorch_kernels_optimized.so read the list
  // (BoxedEvalueList<int64_t> calls EValue::toInt()) and aborted the same way.
  for (const char* path : {
           "tests/fuzz/regressions/backend_fuzzer/kernel_arg_of_another_type.bin",
           "tests/fuzz/regressions/backend_fuzzer/int_list_item_of_another_type.bin",
       }) {
    const std::vector<uint8_t> program = ProgramOfBlob(testing::ReadFile(path));
    ASSERT_FALSE(program.empty()) << path;
    EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram)
        << path;
  }
  // The first input's message names the call, the argument and both types.
  Log().clear();
  const std::vector<uint8_t> program = ProgramOfBlob(
      testing::ReadFile("tests/fuzz/regressions/backend_fuzzer/kernel_arg_of_another_type.bin"));
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
  EXPECT_NE(Log().find("calls operator 'dim_order_ops::_to_dim_order_copy.out' with argument 1 "
                       "('non_blocking') = value"),
            std::string::npos)
      << Log();
  EXPECT_NE(Log().find("of type IntList, expected Bool"), std::string::npos) << Log();
  Log().clear();
  const std::vector<uint8_t> second = ProgramOfBlob(
      testing::ReadFile("tests/fuzz/regressions/backend_fuzzer/int_list_item_of_another_type.bin"));
  EXPECT_EQ(CheckNestedProgram(second.data(), second.size(), kMethod), Error::InvalidProgram);
  EXPECT_NE(Log().find("an int list item is not an Int"), std::string::npos) << Log();
}

// The test program's flatbuffer, mutable: each test changes one field of a copy in place.
class MutatedProgram {
 public:
  explicit MutatedProgram(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  const fb::ExecutionPlan& Plan() const {
    return *fb::GetProgram(bytes_.data())->execution_plan()->Get(0);
  }
  // A copy with the scalar at `field` (a pointer into this program's bytes) set to `value`.
  template <typename T>
  MutatedProgram With(const T* field, T value) const {
    const size_t at = reinterpret_cast<const uint8_t*>(field) - bytes_.data();
    EXPECT_LE(at + sizeof(T), bytes_.size());
    MutatedProgram copy = *this;
    std::memcpy(copy.bytes_.data() + at, &value, sizeof(T));
    return copy;
  }
  Error Check() const { return CheckNestedProgram(bytes_.data(), bytes_.size(), kMethod); }
  // The first value of type `type`, or -1.
  int32_t FirstValueOf(fb::KernelTypes type) const {
    const auto* values = Plan().values();
    for (uint32_t v = 0; v < values->size(); ++v) {
      if (values->Get(v)->val_type() == type) return static_cast<int32_t>(v);
    }
    return -1;
  }
  // The first kernel call of the first chain that stores its op_index (a builder leaves out
  // a field equal to its default, 0).
  const fb::KernelCall& FirstKernelCall() const {
    const auto* instructions = Plan().chains()->Get(0)->instructions();
    for (uint32_t i = 0; i < instructions->size(); ++i) {
      const auto* call = instructions->Get(i)->instr_args_as_KernelCall();
      if (call != nullptr && reinterpret_cast<const flatbuffers::Table*>(call)->GetAddressOf(
                                 fb::KernelCall::VT_OP_INDEX) != nullptr) {
        return *call;
      }
    }
    ADD_FAILURE() << "no kernel call";
    return *instructions->Get(0)->instr_args_as_KernelCall();
  }

 private:
  std::vector<uint8_t> bytes_;
};

MutatedProgram TestProgram() {
  std::vector<uint8_t> pte = testing::ReadFile(testing::TestDataPath("nested_kv.pte"));
  EXPECT_FALSE(pte.empty());
  MutatedProgram program(std::move(pte));
  EXPECT_EQ(program.Check(), Error::Ok);
  return program;
}

TEST_F(NestedProgramChecksTest, RejectsEachKernelArgumentReplacedByAValueOfAnotherType) {
  // Every argument of every kernel call, pointed at a value of each other type the program
  // has: rejected unless the schema accepts that type too.
  const MutatedProgram original = TestProgram();
  const auto* instructions = original.Plan().chains()->Get(0)->instructions();
  int rejected = 0;
  for (uint32_t i = 0; i < instructions->size(); ++i) {
    if (instructions->Get(i)->instr_args_type() != fb::InstructionArguments::KernelCall) continue;
    const fb::KernelCall& call = *instructions->Get(i)->instr_args_as_KernelCall();
    const fb::Operator* op = original.Plan().operators()->Get(call.op_index());
    const OperatorSchema* schema = FindOperatorSchema(op->name()->c_str(), op->overload()->c_str());
    ASSERT_NE(schema, nullptr) << op->name()->str();
    const OperatorArgument* arguments =
        GeneratedOperatorSchemas().arguments + schema->first_argument;
    for (uint32_t a = 0; a < call.args()->size(); ++a) {
      for (int t = 1; t <= static_cast<int>(fb::KernelTypes::MAX); ++t) {
        const int32_t other = original.FirstValueOf(static_cast<fb::KernelTypes>(t));
        if (other < 0) continue;
        const MutatedProgram program = original.With(call.args()->data() + a, other);
        const bool accepted = (arguments[a].tags & (1u << t)) != 0;
        EXPECT_EQ(program.Check(), accepted ? Error::Ok : Error::InvalidProgram)
            << schema->name << " argument " << a << " (" << arguments[a].name << ") = a "
            << KernelTypeName(t);
        rejected += accepted ? 0 : 1;
      }
    }
  }
  EXPECT_GT(rejected, 10);
}

TEST_F(NestedProgramChecksTest, RejectsAKernelCallWithTheArgumentsOfAnotherOperator) {
  // The first kernel call pointed at each other operator of the program whose schema has
  // another number of values: the kernel would index its argument list past its end.
  const MutatedProgram original = TestProgram();
  const fb::KernelCall& call = original.FirstKernelCall();
  const auto* ops = original.Plan().operators();
  int tried = 0;
  for (uint32_t o = 0; o < ops->size(); ++o) {
    const OperatorSchema* schema =
        FindOperatorSchema(ops->Get(o)->name()->c_str(), ops->Get(o)->overload()->c_str());
    ASSERT_NE(schema, nullptr);
    if (schema->num_arguments == call.args()->size()) continue;
    // The op_index field inside the KernelCall table (absent would mean 0).
    const auto* op_index = reinterpret_cast<const int32_t*>(
        reinterpret_cast<const flatbuffers::Table*>(&call)->GetAddressOf(
            fb::KernelCall::VT_OP_INDEX));
    ASSERT_NE(op_index, nullptr);
    Log().clear();
    EXPECT_EQ(original.With(op_index, static_cast<int32_t>(o)).Check(), Error::InvalidProgram)
        << schema->name;
    const std::string expected = "calls operator '" + std::string(schema->name) + "' with " +
                                 std::to_string(call.args()->size()) + " values, expected " +
                                 std::to_string(schema->num_arguments);
    EXPECT_NE(Log().find(expected), std::string::npos) << Log();
    ++tried;
  }
  EXPECT_GT(tried, 0) << "the test program's operators all have the same arity";
}

TEST_F(NestedProgramChecksTest, RejectsAnOperatorTheRuntimeHasNoSchemaFor) {
  const MutatedProgram original = TestProgram();
  const fb::Operator* op = original.Plan().operators()->Get(0);
  ASSERT_GT(op->name()->size(), 7u);
  // Its last letter changed to 'z' ("aten::mm" -> "aten::mz"): still clean UTF-8, no such
  // operator.
  Log().clear();
  EXPECT_EQ(original.With(op->name()->c_str() + op->name()->size() - 1, 'z').Check(),
            Error::InvalidProgram)
      << op->name()->str();
  EXPECT_NE(Log().find("which this runtime has no kernel for"), std::string::npos) << Log();
}

TEST_F(NestedProgramChecksTest, RejectsAnIntListItemThatIsNotAnInt) {
  const MutatedProgram original = TestProgram();
  const int32_t tensor = original.FirstValueOf(fb::KernelTypes::Tensor);
  const flatbuffers::Vector<int64_t>* items = nullptr;
  for (uint32_t v = 0; v < original.Plan().values()->size() && items == nullptr; ++v) {
    const fb::IntList* list = original.Plan().values()->Get(v)->val_as_IntList();
    if (list != nullptr && list->items()->size() > 0) items = list->items();
  }
  ASSERT_NE(items, nullptr) << "the test program has no int list with items";
  // Its first item, an Int value, replaced by a tensor value.
  EXPECT_EQ(original.With(items->data(), static_cast<int64_t>(tensor)).Check(),
            Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, TheSchemaTableHasEveryRegisteredKernel) {
  // This binary links the kernels the runtime registers (the wheel's optimized/portable ATen
  // and prim kernels, the delegate's own): every one has a schema, except ExecuTorch's two
  // integer prim ops no exporter emits (no schema in torch: gen_operator_schemas.py).
  const auto kernels = executorch::runtime::get_registered_kernels();
  ASSERT_GT(kernels.size(), 100u);
  std::vector<std::string> missing;
  for (const auto& kernel : kernels) {
    const std::string name = kernel.name_;
    if (name == "executorch_prim::floordiv.int" || name == "executorch_prim::mod.int") continue;
    if (FindOperatorSchema(name.c_str(), "") == nullptr) missing.push_back(name);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " registered kernels without a schema, e.g. "
                               << (missing.empty() ? "" : missing[0]);
  for (const char* own : {"executorch_trt::kv_cache_update", "executorch_trt::gqa_attention",
                          "executorch::alias", "executorch::update_cross_attn_cache"}) {
    EXPECT_NE(FindOperatorSchema(own, "out"), nullptr) << own;
  }
}

TEST_F(NestedProgramChecksTest, RejectsANonEmptyTensorWithoutData) {
  // backend_fuzzer (after the kernel argument checks): an intermediate tensor lost its
  // allocation info, so ExecuTorch gave it a null data pointer and opt_mul_out wrote through it
  // (SEGV at address 0) at execute.
  const std::vector<uint8_t> program = ProgramOfBlob(
      testing::ReadFile("tests/fuzz/regressions/backend_fuzzer/tensor_without_data.bin"));
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
  EXPECT_NE(Log().find("a tensor with no data"), std::string::npos) << Log();
}

TEST_F(NestedProgramChecksTest, LooksUpOperatorsAsExecuTorchJoinsTheirNames) {
  const OperatorSchema* add = FindOperatorSchema("aten::add", "out");
  ASSERT_NE(add, nullptr);
  EXPECT_STREQ(add->name, "aten::add.out");
  // self, other, alpha, out, and the return value (the out tensor again).
  EXPECT_EQ(add->num_arguments, 5u);
  EXPECT_EQ(FindOperatorSchema("aten::add.out", nullptr), add);
  EXPECT_EQ(FindOperatorSchema("aten::add", ""), nullptr);
  EXPECT_EQ(FindOperatorSchema("aten::add", "ou"), nullptr);
  EXPECT_EQ(FindOperatorSchema("aten::ad", "out"), nullptr);
  // Two out tensors: one TensorList return value (the emitter's _emit_operator).
  const OperatorSchema* alias = FindOperatorSchema("executorch::alias", "out");
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->num_arguments, 5u);
  char text[64];
  EXPECT_STREQ(
      KernelTypeMaskText(GeneratedOperatorSchemas().arguments[alias->first_argument + 4].tags, text,
                         sizeof(text)),
      "TensorList");
}

}  // namespace
}  // namespace executorch_trt
