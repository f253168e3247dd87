#pragma once

// Process sets end to end, shared by the in-process, TCP and MPI runtime tests: a job of four
// ranks registers {0, 1}, {2, 3} and {1, 2, 3}; every collective runs over them, the two
// disjoint sets under the same names at once, interleaved with the whole job's, over three
// steps (the second and third from the response cache), each result checked against a
// reference computed from every member's input; then the pair sets are removed.

#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime.h"

namespace zen::testing {

// Why a rank's steps failed; empty when they did not.
using Failure = std::string;

// add_process_set / remove_process_set on this rank, waiting with the tests' bound.
Result<int32_t> addSet(Runtime& rt, std::vector<int32_t> ranks);
Status removeSet(Runtime& rt, int32_t id);

// Every rank of a 4-rank job calls it; bounded waits throughout. fakeDevice: the sets'
// tensors are on test/runtime/fake_device.h's GPU (the job's stay on the host), and their
// results must come back there.
Failure processSetSteps(Runtime& rt, bool fakeDevice = false);

}  // namespace zen::testing
