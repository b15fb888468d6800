// What a stage changed: a readable summary of the differences between two decode
// programs (elf_dump --diff a.elf b.elf), for review next to a BUILD diff.
//   runs per token a -> b, launches, host writes per token
//   groups merged / split / renamed / added / removed (launches are matched by
//     the BO their output binds, partitions ".part<N>" counting as their whole)
//   BO category counts and per-BO category changes, BOs added / removed,
//   layouts changed, kernel symbols changed, lineage entries added.
// Lines that differ only in a layer number ("L3.") or a partition number
// (".part2") are printed once as "L*." / ".part*" with a count ("x30").
// Thread-safety: stateless.
#ifndef DK_TOOLS_ELF_DUMP_DIFF_H_
#define DK_TOOLS_ELF_DUMP_DIFF_H_

#include <string>
#include <vector>

#include "elf/program.pb.h"

namespace dk::elf_dump {

// Two header lines ("--- a (lineage)", "+++ b (lineage)"), then the summary, or
// "no differences" when the programs agree in everything the summary covers.
std::string DiffPrograms(const elf::Program& a, const elf::Program& b, const std::string& a_name = "a",
                         const std::string& b_name = "b");

// Lines with layer / partition numbers replaced by "*" grouped, first-seen order,
// "  (xN)" appended to lines that occur N > 1 times. Exposed for tests.
std::string Compact(const std::vector<std::string>& lines, const std::string& indent = "  ");

}  // namespace dk::elf_dump

#endif  // DK_TOOLS_ELF_DUMP_DIFF_H_
