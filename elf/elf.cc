// The decode ELF's bytes: writing a program into an ELF64 relocatable file and
// reading one back (elf.h).
#include "elf/elf.h"

#include <elf.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "util/read_file.h"
#include "util/status.h"

namespace dk::elf {
namespace {

// Appends `s` and its NUL to string table `tab`; returns its offset.
uint32_t AddString(std::string& tab, const std::string& s) {
  const uint32_t at = static_cast<uint32_t>(tab.size());
  tab += s;
  tab.push_back('\0');
  return at;
}

// The symbol table of a program: entry points (defined in .dk.entries, value =
// group index * 4), then the kernel symbols (undefined), each once, in first-use
// order; their string table and the .dk.entries bytes.
struct Symbols {
  std::vector<Elf64_Sym> syms;
  std::string strtab;
  std::string entries;
};

Symbols SymbolsOf(const Program& program) {
  std::vector<std::string> entry_names, kernel_names;
  std::set<std::string> seen;
  for (const Step& s : program.steps()) {
    if (!s.has_group()) continue;
    entry_names.push_back(s.group().entry_symbol());
    for (const Launch& l : s.group().launches()) {
      if (seen.insert(l.kernel_symbol()).second) kernel_names.push_back(l.kernel_symbol());
    }
  }
  Symbols out;
  out.strtab.assign(1, '\0');
  out.syms.resize(1);
  std::memset(&out.syms[0], 0, sizeof(Elf64_Sym));
  for (size_t i = 0; i < entry_names.size(); ++i) {
    Elf64_Sym s{};
    s.st_name = AddString(out.strtab, entry_names[i]);
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    s.st_shndx = 2;
    s.st_value = i * 4;
    s.st_size = 4;
    out.syms.push_back(s);
    const uint32_t index = static_cast<uint32_t>(i);
    out.entries.append(reinterpret_cast<const char*>(&index), 4);
  }
  for (const std::string& k : kernel_names) {
    Elf64_Sym s{};
    s.st_name = AddString(out.strtab, k);
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    s.st_shndx = SHN_UNDEF;
    out.syms.push_back(s);
  }
  return out;
}

// The ELF header of a file whose section headers (`shnum`, the last the section
// name table) lie at `shoff`.
Elf64_Ehdr ElfHeader(uint64_t shoff, uint16_t shnum) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh.e_type = ET_REL;
  eh.e_machine = EM_NONE;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shoff = shoff;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = shnum;
  eh.e_shstrndx = static_cast<uint16_t>(shnum - 1);
  return eh;
}

}  // namespace

absl::StatusOr<std::string> WriteElf(const Program& program) {
  if (auto s = ValidateProgram(program); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("refusing to write an invalid program: ", s.message()));
  }
  return WriteElfUnvalidatedForTesting(program);
}

absl::StatusOr<std::string> WriteElfUnvalidatedForTesting(const Program& program) {
  std::string payload;
  {
    // Deterministic: map fields (launch params) in key order, so the same program
    // always gives the same bytes (Bazel caches and reviews compare them).
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!program.SerializeToCodedStream(&coded)) {
      return absl::InternalError("cannot serialize program");
    }
  }
  const Symbols symbols = SymbolsOf(program);
  std::string shstrtab(1, '\0');
  const uint32_t n_program = AddString(shstrtab, kProgramSection);
  const uint32_t n_entries = AddString(shstrtab, kEntriesSection);
  const uint32_t n_symtab = AddString(shstrtab, ".symtab");
  const uint32_t n_strtab = AddString(shstrtab, ".strtab");
  const uint32_t n_shstrtab = AddString(shstrtab, ".shstrtab");

  std::string out(sizeof(Elf64_Ehdr), '\0');
  auto append = [&out](const void* data, size_t n, size_t align) {
    while (out.size() % align) out.push_back('\0');
    const uint64_t at = out.size();
    out.append(static_cast<const char*>(data), n);
    return at;
  };
  const std::vector<Elf64_Sym>& syms = symbols.syms;
  const std::string& entries = symbols.entries;
  const std::string& strtab = symbols.strtab;
  std::vector<Elf64_Shdr> sh(6);
  std::memset(sh.data(), 0, sh.size() * sizeof(Elf64_Shdr));
  sh[1] = {n_program, SHT_PROGBITS, 0, 0, append(payload.data(), payload.size(), 8),
           payload.size(), 0, 0, 8, 0};
  sh[2] = {n_entries, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0,
           append(entries.data(), entries.size(), 4), entries.size(), 0, 0, 4, 0};
  sh[3] = {n_symtab, SHT_SYMTAB, 0, 0,
           append(syms.data(), syms.size() * sizeof(Elf64_Sym), 8),
           syms.size() * sizeof(Elf64_Sym), 4, 1, 8, sizeof(Elf64_Sym)};
  sh[4] = {n_strtab, SHT_STRTAB, 0, 0, append(strtab.data(), strtab.size(), 1), strtab.size(),
           0, 0, 1, 0};
  sh[5] = {n_shstrtab, SHT_STRTAB, 0, 0, append(shstrtab.data(), shstrtab.size(), 1),
           shstrtab.size(), 0, 0, 1, 0};
  const uint64_t shoff = append(sh.data(), sh.size() * sizeof(Elf64_Shdr), 8);
  const Elf64_Ehdr eh = ElfHeader(shoff, static_cast<uint16_t>(sh.size()));
  std::memcpy(out.data(), &eh, sizeof(eh));
  return out;
}

absl::Status WriteElfFile(const Program& program, const std::string& path) {
  auto bytes = WriteElf(program);
  if (!bytes.ok()) return bytes.status();
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  f.close();
  if (!f) {
    return absl::UnavailableError(absl::StrCat("cannot write decode ELF ", path,
                                               errno != 0 ? ": " : "",
                                               errno != 0 ? std::strerror(errno) : ""));
  }
  return absl::OkStatus();
}

namespace {

// Reading one file's bytes: every error names the file.
class Reader {
 public:
  Reader(absl::string_view bytes, absl::string_view name) : bytes_(bytes), name_(name) {}

  template <typename... Parts>
  absl::Status Bad(const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat("decode ELF ", name_, ": ", parts...));
  }

  // The section headers, each inside the file, and a valid section name table.
  absl::StatusOr<std::vector<Elf64_Shdr>> Sections(Elf64_Ehdr* eh) const;
  // The NUL-terminated string at `off` of string table `tab`.
  absl::StatusOr<std::string> StringAt(const Elf64_Shdr& tab, uint64_t off) const;
  // The program of section `ps`, parsed, of the supported schema and valid.
  absl::StatusOr<Program> ParseProgram(const Elf64_Shdr& ps) const;
  // The symbol table defines every group's entry symbol in .dk.entries (section
  // `entries_idx`) and leaves every kernel symbol undefined.
  absl::Status CheckSymbols(const Program& program, const std::vector<Elf64_Shdr>& sh, int symtab_idx,
                            int entries_idx) const;

 private:
  absl::string_view bytes_;
  absl::string_view name_;
};

absl::StatusOr<std::vector<Elf64_Shdr>> Reader::Sections(Elf64_Ehdr* out) const {
  const uint64_t size = bytes_.size();
  if (size < sizeof(Elf64_Ehdr)) {
    return Bad("file is ", size, " bytes, shorter than an ELF64 header (truncated?)");
  }
  Elf64_Ehdr& eh = *out;
  std::memcpy(&eh, bytes_.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Bad("bad magic (not an ELF file)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Bad("not a 64-bit ELF");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Bad("not little-endian");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return Bad("unexpected section header size ", eh.e_shentsize);
  if (eh.e_shnum == 0 || eh.e_shoff > size ||
      eh.e_shnum * uint64_t{sizeof(Elf64_Shdr)} > size - eh.e_shoff) {
    return Bad("section header table (offset ", eh.e_shoff, ", ", eh.e_shnum,
               " entries) lies outside the file (truncated?)");
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), bytes_.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  for (size_t i = 0; i < sh.size(); ++i) {
    // (A NOBITS section occupies no file bytes; every other one, NULL included, must
    // lie inside the file: a NULL-typed .dk.program with an offset near 2^64 was
    // parsed from before the buffer. Found by //elf:elf_fuzzer.)
    if (sh[i].sh_type == SHT_NOBITS) continue;
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset) {
      return Bad("section ", i, " (offset ", sh[i].sh_offset, ", size ", sh[i].sh_size,
                 ") extends past the end of the file (", size, " bytes)");
    }
  }
  if (eh.e_shstrndx >= sh.size() || sh[eh.e_shstrndx].sh_type != SHT_STRTAB) {
    return Bad("section name table index ", eh.e_shstrndx, " is invalid");
  }
  return sh;
}

absl::StatusOr<std::string> Reader::StringAt(const Elf64_Shdr& tab, uint64_t off) const {
  if (off >= tab.sh_size) return Bad("string offset ", off, " is outside its string table");
  const char* begin = bytes_.data() + tab.sh_offset + off;
  const void* nul = std::memchr(begin, '\0', tab.sh_size - off);
  if (nul == nullptr) return Bad("unterminated string in a string table");
  return std::string(begin, static_cast<const char*>(nul));
}

absl::StatusOr<Program> Reader::ParseProgram(const Elf64_Shdr& ps) const {
  Program program;
  if (ps.sh_size > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return Bad(kProgramSection, " is ", ps.sh_size, " bytes, more than a program message can be");
  }
  bool parsed = false;
  {
    // libprotobuf logs its own line for some malformed input (invalid UTF-8 in a
    // string field) before failing; the error below says it once, naming the file.
    google::protobuf::LogSilencer silence;
    parsed = program.ParseFromArray(bytes_.data() + ps.sh_offset, static_cast<int>(ps.sh_size));
  }
  if (!parsed) {
    return Bad(kProgramSection, " does not hold a valid program message (corrupt?)");
  }
  if (program.schema_version() != kSchemaVersion) {
    return Bad("schema version ", program.schema_version(), " is not the supported version ",
               kSchemaVersion, "; rebuild the ELF with this toolkit");
  }
  if (auto s = ValidateProgram(program); !s.ok()) return Bad(s.message());
  return program;
}

absl::Status Reader::CheckSymbols(const Program& program, const std::vector<Elf64_Shdr>& sh, int symtab_idx,
                                  int entries_idx) const {
  const Elf64_Shdr& st = sh[symtab_idx];
  if (st.sh_entsize != sizeof(Elf64_Sym) || st.sh_size % sizeof(Elf64_Sym) != 0 ||
      st.sh_link >= sh.size() || sh[st.sh_link].sh_type != SHT_STRTAB) {
    return Bad("malformed symbol table");
  }
  std::set<std::string> defined, undefined;
  for (uint64_t off = sizeof(Elf64_Sym); off < st.sh_size; off += sizeof(Elf64_Sym)) {
    Elf64_Sym sym;
    std::memcpy(&sym, bytes_.data() + st.sh_offset + off, sizeof(sym));
    DK_ASSIGN_OR_RETURN(const std::string n, StringAt(sh[st.sh_link], sym.st_name));
    if (sym.st_shndx == SHN_UNDEF) {
      undefined.insert(n);
    } else if (static_cast<int>(sym.st_shndx) == entries_idx) {
      defined.insert(n);
    }
  }
  for (const Step& s : program.steps()) {
    if (!s.has_group()) continue;
    if (defined.count(s.group().entry_symbol()) == 0) {
      return Bad("entry symbol \"", s.group().entry_symbol(), "\" of group \"", s.group().name(),
                 "\" is missing from the symbol table");
    }
    for (const Launch& l : s.group().launches()) {
      if (undefined.count(l.kernel_symbol()) == 0) {
        return Bad("kernel symbol \"", l.kernel_symbol(), "\" is missing from the symbol table");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Program> ReadElf(absl::string_view bytes, absl::string_view name) {
  const Reader reader(bytes, name);
  Elf64_Ehdr eh;
  DK_ASSIGN_OR_RETURN(const std::vector<Elf64_Shdr> sh, reader.Sections(&eh));
  int program_idx = -1, entries_idx = -1, symtab_idx = -1;
  for (size_t i = 0; i < sh.size(); ++i) {
    DK_ASSIGN_OR_RETURN(const std::string n, reader.StringAt(sh[eh.e_shstrndx], sh[i].sh_name));
    if (n == kProgramSection) program_idx = static_cast<int>(i);
    if (n == kEntriesSection) entries_idx = static_cast<int>(i);
    if (sh[i].sh_type == SHT_SYMTAB) symtab_idx = static_cast<int>(i);
  }
  if (program_idx < 0) return reader.Bad("no ", kProgramSection, " section (not a decode ELF)");
  if (sh[program_idx].sh_type != SHT_PROGBITS) {
    return reader.Bad(kProgramSection, " has section type ", sh[program_idx].sh_type, ", not PROGBITS");
  }
  if (symtab_idx < 0) return reader.Bad("no symbol table");
  DK_ASSIGN_OR_RETURN(Program program, reader.ParseProgram(sh[program_idx]));
  DK_RETURN_IF_ERROR(reader.CheckSymbols(program, sh, symtab_idx, entries_idx));
  return program;
}

absl::StatusOr<Program> ReadElfFile(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string bytes, ReadRegularFile(path, "decode ELF", kMaxElfFileBytes));
  return ReadElf(bytes, path);
}

}  // namespace dk::elf
