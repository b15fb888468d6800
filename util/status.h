// Status propagation macros for absl::Status / absl::StatusOr at boundaries.
#ifndef DK_UTIL_STATUS_H_
#define DK_UTIL_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DK_STATUS_CONCAT_INNER_(a, b) a##b
#define DK_STATUS_CONCAT_(a, b) DK_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define DK_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::absl::Status dk_status_ = (expr);       \
    if (!dk_status_.ok()) return dk_status_;  \
  } while (0)

// `DK_ASSIGN_OR_RETURN(auto x, F());` assigns the value of an absl::StatusOr or
// returns its error from the enclosing function.
#define DK_ASSIGN_OR_RETURN(lhs, expr) \
  DK_ASSIGN_OR_RETURN_IMPL_(DK_STATUS_CONCAT_(dk_statusor_, __LINE__), lhs, expr)
#define DK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // DK_UTIL_STATUS_H_
