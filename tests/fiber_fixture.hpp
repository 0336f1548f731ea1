// fiber_fixture.hpp — the Fiber suite's fixture, shared by fiber_test and fiber_lifetime_test.
#pragma once

#include "backends.hpp"

namespace uring::test {

class Fiber : public backend_test {};

}  // namespace uring::test
