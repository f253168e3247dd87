#include "core/dtype.h"

namespace zen {

size_t dataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
  }
  return 0;
}

const char* dataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat64:
      return "float64";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "unknown";
}

Result<DataType> parseDataType(const std::string& name) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                     DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    if (name == dataTypeName(d)) return d;
  }
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "unknown dtype '{}' (expected float32, float16, bfloat16, float64, int32 or "
                   "int64)",
                   name);
}

}  // namespace zen
