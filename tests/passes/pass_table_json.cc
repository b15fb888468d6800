// Prints the pass table (optimizations/passes.h) as JSON on stdout, for
// options_match_rules_test, which holds the optimization rules' attributes to it:
//   [{"name", "doc", "options": [{"name", "kind", "default", "doc", "choices",
//     "min", "max"}]}]   (min / max only for an int option with a declared range)
#include <cstdint>
#include <cstdio>

#include "nlohmann/json.hpp"
#include "optimizations/passes.h"

int main() {
  using dk::opt::OptionKind;
  nlohmann::json out = nlohmann::json::array();
  for (const dk::opt::Pass& pass : dk::opt::Passes()) {
    nlohmann::json options = nlohmann::json::array();
    for (const dk::opt::OptionSpec& spec : pass.options) {
      nlohmann::json o = {{"name", spec.name},
                          {"kind", spec.kind == OptionKind::kInt      ? "int"
                                   : spec.kind == OptionKind::kString ? "string"
                                                                      : "string_list"},
                          {"default", spec.default_value},
                          {"doc", spec.doc},
                          {"choices", spec.choices}};
      if (spec.min != INT64_MIN) o["min"] = spec.min;
      if (spec.max != INT64_MAX) o["max"] = spec.max;
      options.push_back(o);
    }
    out.push_back({{"name", pass.name}, {"doc", pass.doc}, {"options", options}});
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
