// uring/uring.hpp — everything, for applications that prefer one include.
#pragma once

#include "uring/async_mutex.hpp"
#include "uring/async_semaphore.hpp"
#include "uring/buffer.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"
#include "uring/file.hpp"
#include "uring/io.hpp"
#include "uring/kernel_features.hpp"
#include "uring/plan.hpp"
#include "uring/spawn.hpp"
#include "uring/sync_wait.hpp"
#include "uring/task.hpp"
#include "uring/time.hpp"
#include "uring/version.hpp"
#include "uring/when_all.hpp"
#include "uring/when_any.hpp"
