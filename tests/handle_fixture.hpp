// handle_fixture.hpp — the Handles suite's fixture, shared by handle_test and handle_hop_test.
#pragma once

#include "backends.hpp"

namespace uring::test {

class Handles : public backend_test {};

}  // namespace uring::test
