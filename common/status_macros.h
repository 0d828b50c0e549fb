// File: status_macros.h
//
// Early-return helpers for absl::Status, which bookworm's Abseil (20220623) lacks.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUEST_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    const ::absl::Status gpuest_status_ = (expr);    \
    if (!gpuest_status_.ok()) return gpuest_status_; \
  } while (0)

#define GPUEST_CONCAT_INNER(a, b) a##b
#define GPUEST_CONCAT(a, b) GPUEST_CONCAT_INNER(a, b)

#define GPUEST_ASSIGN_OR_RETURN(lhs, expr) \
  GPUEST_ASSIGN_OR_RETURN_IMPL(GPUEST_CONCAT(gpuest_statusor_, __LINE__), lhs, expr)

#define GPUEST_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
