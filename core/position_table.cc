// PositionTable (position_table.h): growth and clearing. Nothing goes on the wire here.
#include "core/position_table.h"

#include <utility>

namespace zen {
namespace {

// 8 KiB of slots to begin with: a sparse part's first few thousand positions never rehash.
constexpr size_t kMinSlots = 1024;

}  // namespace

void PositionTable::clear() {
  for (uint32_t s : used_) slots_[s] = 0;
  used_.clear();
}

void PositionTable::grow() {
  std::vector<uint64_t> old = std::move(slots_);
  const size_t slots = old.empty() ? kMinSlots : old.size() * 2;
  slots_.assign(slots, 0);
  mask_ = slots - 1;
  shift_ = 64 - __builtin_ctzll(slots);
  // Row k keeps its number: re-insert in row order, recording each one's new slot.
  std::vector<uint32_t> oldUsed = std::move(used_);
  used_.assign(oldUsed.size(), 0);
  for (size_t row = 0; row < oldUsed.size(); ++row) {
    const uint64_t slot = old[oldUsed[row]];
    size_t s = slotOf(static_cast<uint32_t>((slot >> 32) - 1));
    while (slots_[s] != 0) s = (s + 1) & mask_;
    slots_[s] = slot;
    used_[row] = static_cast<uint32_t>(s);
  }
}

}  // namespace zen
