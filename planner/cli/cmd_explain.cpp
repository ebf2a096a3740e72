#include "commands.h"
#include "planner/model/errors.h"
namespace ucplan {
int run_explain(const ExplainOptions&) { throw UserError("", "explain", "not implemented yet"); }
}  // namespace ucplan
