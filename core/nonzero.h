#pragma once

#include "core/status.h"
#include "core/tensor.h"

namespace zen {

// Nonzero extraction: the rows of a dense [numRows x rowSize] tensor that hold any non-zero
// element (negative zero counts as zero), as a coalesced SparseTensor in ascending order.
Status extractNonzeroRows(const DenseView& dense, SparseTensor* out);

}  // namespace zen
