#include "commands.h"
#include "planner/model/errors.h"
namespace ucplan {
int run_compile(const CompileOptions&) { throw UserError("", "compile", "not implemented yet"); }
}  // namespace ucplan
