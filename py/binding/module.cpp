// Copyright (c) executorch-trt authors.
//
// module.cpp: `_runtime_binding`, the Python extension module executorch_trt.runtime runs
// programs with (py/executorch_trt/runtime.py is its only caller and owns the public API).
//
// It converts between Python values and ProgramSession's plain values, and releases the GIL
// around everything that runs ExecuTorch (load, bind, execute): nothing under it takes the GIL
// back, since ExecuTorch's log lines go straight to stderr (stderr_log.h). Tensors cross as
// (data pointer, ExecuTorch dtype code, sizes); bytes come back as `_Bytes`, a writable
// buffer-protocol object that torch.frombuffer views without copying. Text from the program
// is escaped where it is not valid UTF-8 (safe_text.h): it never raises while converting.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <executorch/runtime/backend/interface.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "extension/program/loaded_program.h"
#include "py/binding/program_session.h"
#include "py/binding/runtime_setup.h"
#include "py/binding/safe_text.h"
#include "py/binding/stderr_log.h"

namespace py = pybind11;

namespace executorch_trt::python {
namespace {

// Bytes Python sees through the buffer protocol: owned (an output's copy) or a view of a
// program's storage that keeps the program alive.
class Bytes {
 public:
  explicit Bytes(std::vector<uint8_t> owned) : owned_(std::move(owned)) {}
  Bytes(void* data, size_t size, std::shared_ptr<ProgramSession> owner)
      : view_(data), size_(size), owner_(std::move(owner)) {}

  void* data() { return view_ != nullptr ? view_ : owned_.data(); }
  size_t size() const { return view_ != nullptr ? size_ : owned_.size(); }

 private:
  std::vector<uint8_t> owned_;
  void* view_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<ProgramSession> owner_;
};

py::str Text(const std::string& text) { return py::str(EscapeInvalidUtf8(text)); }

// Raises the Python exception for `err`: KeyError (not found), ValueError (a bad argument) or
// RuntimeError, with `message` (escaped).
[[noreturn]] void Raise(Error err, const std::string& message) {
  const std::string text = EscapeInvalidUtf8(message);
  if (err == Error::NotFound) {
    throw py::key_error(text);
  }
  if (err == Error::InvalidArgument) {
    throw py::value_error(text);
  }
  throw std::runtime_error(text);
}

// Runs `load(&error)` (a LoadedProgram factory) without the GIL; RuntimeError on failure (the
// program is at fault, not the argument's type), with the error lines ExecuTorch and the
// delegates logged while loading (a delegate's reason for rejecting its blob, a missing weight's
// key) after LoadedProgram's message.
template <typename LoadFn>
std::shared_ptr<ProgramSession> LoadWithoutGil(LoadFn load) {
  std::unique_ptr<LoadedProgram> program;
  std::string error;
  {
    py::gil_scoped_release release;
    InitializeRuntimeOnce();
    UseStderrLog();
    LogCapture capture;
    Result<std::unique_ptr<LoadedProgram>> loaded = load(&error);
    if (loaded.ok()) {
      program = std::move(loaded.get());
    } else {
      const std::string lines = capture.Lines();
      if (!lines.empty()) {
        error += "; ExecuTorch logged:\n" + lines;
      }
    }
  }
  if (program == nullptr) {
    Raise(Error::Internal, error);
  }
  return std::make_shared<ProgramSession>(std::move(program));
}

std::shared_ptr<ProgramSession> LoadFile(const std::string& path, const std::string& data_path) {
  return LoadWithoutGil(
      [&](std::string* error) { return LoadedProgram::LoadFile(path, {}, error, data_path); });
}

std::shared_ptr<ProgramSession> LoadBytes(const py::buffer& data, const std::string& what,
                                          const std::string& data_path) {
  const py::buffer_info info = data.request();
  const auto* begin = static_cast<const uint8_t*>(info.ptr);
  std::vector<uint8_t> bytes(begin, begin + info.size * info.itemsize);
  return LoadWithoutGil([&](std::string* error) {
    return LoadedProgram::LoadBytes(std::move(bytes), what, {}, error, data_path);
  });
}

py::tuple SpecTuple(bool is_tensor, const TensorSpec& spec) {
  if (!is_tensor) {
    return py::tuple();
  }
  return py::make_tuple(static_cast<int>(spec.dtype), py::tuple(py::cast(spec.sizes)));
}

InputValue ToInput(const py::handle& item, size_t index) {
  InputValue in;
  if (py::isinstance<py::tuple>(item)) {
    const auto t = item.cast<py::tuple>();
    in.kind = InputValue::Kind::kTensor;
    in.data = reinterpret_cast<void*>(t[0].cast<uintptr_t>());
    in.dtype = static_cast<ScalarType>(t[1].cast<int>());
    for (const auto& size : t[2]) {
      in.sizes.push_back(size.cast<int32_t>());
    }
  } else if (py::isinstance<py::bool_>(item)) {
    in.kind = InputValue::Kind::kBool;
    in.bool_value = item.cast<bool>();
  } else if (py::isinstance<py::int_>(item)) {
    in.kind = InputValue::Kind::kInt;
    in.int_value = item.cast<int64_t>();
  } else if (py::isinstance<py::float_>(item)) {
    in.kind = InputValue::Kind::kDouble;
    in.double_value = item.cast<double>();
  } else if (!item.is_none()) {
    throw py::type_error("input " + std::to_string(index) + ": unsupported type " +
                         std::string(py::str(item.get_type().attr("__name__"))));
  }
  return in;
}

py::list Execute(ProgramSession& session, const std::string& method, const py::sequence& args) {
  std::vector<InputValue> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    inputs.push_back(ToInput(args[i], i));
  }
  std::vector<OutputValue> outputs;
  std::string error;
  Error err;
  {
    py::gil_scoped_release release;
    err = session.Execute(method, inputs, &outputs, &error);
  }
  if (err != Error::Ok) {
    Raise(err == Error::NotFound || err == Error::InvalidArgument ? err : Error::Internal, error);
  }
  py::list result;
  for (OutputValue& out : outputs) {
    switch (out.kind) {
      case OutputValue::Kind::kTensor:
        result.append(py::make_tuple(std::make_shared<Bytes>(std::move(out.bytes)),
                                     static_cast<int>(out.dtype), py::tuple(py::cast(out.sizes))));
        break;
      case OutputValue::Kind::kInt:
        result.append(py::int_(out.int_value));
        break;
      case OutputValue::Kind::kDouble:
        result.append(py::float_(out.double_value));
        break;
      case OutputValue::Kind::kBool:
        result.append(py::bool_(out.bool_value));
        break;
      case OutputValue::Kind::kNone:
        result.append(py::none());
        break;
    }
  }
  return result;
}

}  // namespace
}  // namespace executorch_trt::python

PYBIND11_MODULE(_runtime_binding, m) {
  using executorch_trt::python::Bytes;
  using executorch_trt::python::ProgramSession;
  namespace etp = executorch_trt::python;
  m.doc() = "executorch_trt.runtime's binding over ExecuTorch's C++ runtime (private API).";
  {
    py::gil_scoped_release release;
    etp::InitializeRuntimeOnce();
  }

  py::class_<Bytes, std::shared_ptr<Bytes>>(m, "_Bytes", py::buffer_protocol())
      .def_buffer([](Bytes& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1}, /*readonly=*/false);
      })
      .def("__len__", &Bytes::size);

  py::class_<ProgramSession, std::shared_ptr<ProgramSession>>(m, "Program")
      .def_property_readonly("method_names",
                             [](const ProgramSession& s) {
                               py::list names;
                               for (const std::string& n : s.method_names()) {
                                 names.append(etp::Text(n));
                               }
                               return names;
                             })
      .def("buffers",
           [](const ProgramSession& s) {
             py::list out;
             for (const executorch_trt::extension::NamedBuffer& b : s.buffers()) {
               out.append(py::make_tuple(etp::Text(b.name), static_cast<int>(b.dtype),
                                         py::tuple(py::cast(b.sizes)), b.nbytes));
             }
             return out;
           })
      .def("buffer_name_list",
           [](const ProgramSession& s) { return etp::Text(s.BufferNameList()); })
      .def("buffer_view",
           [](const std::shared_ptr<ProgramSession>& s, const std::string& name) -> py::object {
             const executorch_trt::extension::NamedBuffer* buffer = nullptr;
             for (const auto& b : s->buffers()) {
               if (b.name == name) {
                 buffer = &b;
               }
             }
             if (buffer == nullptr) {
               throw py::key_error(name);
             }
             void* data = nullptr;
             {
               py::gil_scoped_release release;  // the lock may be held by an execute
               data = s->buffer_data(name);
             }
             if (data == nullptr) {
               return py::none();
             }
             return py::cast(std::make_shared<Bytes>(data, buffer->nbytes, s));
           })
      .def("initial_value",
           [](const ProgramSession& s, const std::string& name) {
             const std::vector<uint8_t>& bytes = s.initial_value(name);
             return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
           })
      .def("bind_buffers",
           [](ProgramSession& s,
              const std::vector<std::tuple<std::string, uintptr_t, size_t>>& items) {
             std::vector<ProgramSession::Binding> bindings;
             for (const auto& [name, data, nbytes] : items) {
               bindings.push_back({name, reinterpret_cast<void*>(data), nbytes});
             }
             std::string error;
             executorch_trt::Error err;
             {
               py::gil_scoped_release release;
               err = s.BindBuffers(bindings, &error);
             }
             if (err != executorch_trt::Error::Ok) {
               etp::Raise(err, error);
             }
           })
      .def("signature",
           [](ProgramSession& s, const std::string& method) {
             etp::MethodSignature sig;
             std::string error;
             executorch_trt::Error err;
             {
               py::gil_scoped_release release;  // the lock may be held by an execute
               err = s.Signature(method, &sig, &error);
             }
             if (err != executorch_trt::Error::Ok) {
               etp::Raise(err, error);
             }
             py::list inputs, outputs;
             for (size_t i = 0; i < sig.inputs.size(); ++i) {
               inputs.append(etp::SpecTuple(sig.input_is_tensor[i], sig.inputs[i]));
             }
             for (size_t i = 0; i < sig.outputs.size(); ++i) {
               outputs.append(etp::SpecTuple(sig.output_is_tensor[i], sig.outputs[i]));
             }
             return py::make_tuple(inputs, outputs);
           })
      .def("execute", &etp::Execute);

  m.def("load_file", &etp::LoadFile, py::arg("path"), py::arg("data_path") = "");
  m.def("is_backend_registered", [](const std::string& name) {
    return executorch::runtime::get_backend_class(name.c_str()) != nullptr;
  });
  m.def("load_bytes", &etp::LoadBytes, py::arg("data"), py::arg("what"), py::arg("data_path") = "");
}
