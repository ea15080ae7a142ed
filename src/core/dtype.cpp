#include "core/dtype.h"

namespace laya {

const DTypeInfo* dtype_info(uint32_t raw) {
  static const DTypeInfo kF32{"F32", 1, 4, true};
  static const DTypeInfo kF16{"F16", 1, 2, true};
  static const DTypeInfo kBF16{"BF16", 1, 2, true};
  static const DTypeInfo kQ4_0{"Q4_0", 32, sizeof(BlockQ4_0), true};
  static const DTypeInfo kQ4_1{"Q4_1", 32, sizeof(BlockQ4_1), true};
  static const DTypeInfo kQ5_0{"Q5_0", 32, sizeof(BlockQ5_0), true};
  static const DTypeInfo kQ5_1{"Q5_1", 32, sizeof(BlockQ5_1), true};
  static const DTypeInfo kQ8_0{"Q8_0", 32, sizeof(BlockQ8_0), true};
  static const DTypeInfo kQ8_1{"Q8_1", 32, 36, false};
  static const DTypeInfo kQ2_K{"Q2_K", 256, 84, false};
  static const DTypeInfo kQ3_K{"Q3_K", 256, 110, false};
  static const DTypeInfo kQ4_K{"Q4_K", 256, sizeof(BlockQ4_K), true};
  static const DTypeInfo kQ5_K{"Q5_K", 256, sizeof(BlockQ5_K), true};
  static const DTypeInfo kQ6_K{"Q6_K", 256, sizeof(BlockQ6_K), true};
  static const DTypeInfo kQ8_K{"Q8_K", 256, 292, false};
  static const DTypeInfo kU32{"U32", 1, 4, false};
  static const DTypeInfo kMlx2{"MLX_Q2", 32, 8, true};
  static const DTypeInfo kMlx3{"MLX_Q3", 32, 12, true};
  static const DTypeInfo kMlx4{"MLX_Q4", 32, 16, true};
  static const DTypeInfo kMlx5{"MLX_Q5", 32, 20, true};
  static const DTypeInfo kMlx6{"MLX_Q6", 32, 24, true};
  static const DTypeInfo kMlx8{"MLX_Q8", 32, 32, true};
  switch (raw) {
    case 0: return &kF32;
    case 1: return &kF16;
    case 2: return &kQ4_0;
    case 3: return &kQ4_1;
    case 6: return &kQ5_0;
    case 7: return &kQ5_1;
    case 8: return &kQ8_0;
    case 9: return &kQ8_1;
    case 10: return &kQ2_K;
    case 11: return &kQ3_K;
    case 12: return &kQ4_K;
    case 13: return &kQ5_K;
    case 14: return &kQ6_K;
    case 15: return &kQ8_K;
    case 30: return &kBF16;
    case 0x100: return &kU32;
    case 0x102: return &kMlx2;
    case 0x103: return &kMlx3;
    case 0x104: return &kMlx4;
    case 0x105: return &kMlx5;
    case 0x106: return &kMlx6;
    case 0x108: return &kMlx8;
    default: return nullptr;
  }
}

}  // namespace laya
