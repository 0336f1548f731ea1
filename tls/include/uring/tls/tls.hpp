/// @file
/// uring/tls/tls.hpp — TLS on uring's sockets (the uring::tls component, on OpenSSL 3).
///
/// Provides: everything in uring/tls/{context,stream,error,ktls}.hpp.
#pragma once

#include "uring/tls/context.hpp"
#include "uring/tls/error.hpp"
#include "uring/tls/ktls.hpp"
#include "uring/tls/stream.hpp"
