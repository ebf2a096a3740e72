#include "commands.h"
#include "planner/model/errors.h"
namespace ucplan {
int run_check(const CheckOptions&) { throw UserError("", "check", "not implemented yet"); }
}  // namespace ucplan
