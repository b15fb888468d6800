"""Shell quoting for the launcher scripts that rules write (generate, verify, profile).

Every argument a launcher passes goes through one of these, so a value with a space,
a quote or a `$` reaches the tool as written in the BUILD file.

A launcher runs in its runfiles tree, but the tools resolve a relative path the user
types against BUILD_WORKING_DIRECTORY (util/user_path.h). A default that names a
runfile is therefore made absolute at run time ("$PWD"/'<short_path>'), and is
passed under the same flag a user types, before "$@", so that `-- --weights=DIR`
(the last occurrence of a flag wins) overrides it.
"""

def shell_quote(s):
    """`s` as one shell word: single-quoted, with embedded single quotes escaped."""
    return "'" + str(s).replace("'", "'\\''") + "'"

def shell_flag(flag, value):
    """`--flag=value`, the value quoted."""
    return "--%s=%s" % (flag, shell_quote(value))

def shell_runfile(file):
    """The absolute path of a runfile at run time: "$PWD"/'<short_path>'."""
    return "\"$PWD\"/" + shell_quote(file.short_path)

def shell_runfile_flag(flag, file):
    """`--flag="$PWD"/'<short_path>'`: a runfile, absolute at run time."""
    return "--%s=%s" % (flag, shell_runfile(file))

def shell_exec(tool, args):
    """The launcher's command line: exec the tool (a runfile) with args, then the user's "$@"."""
    return "exec %s %s \"$@\"" % (shell_runfile(tool), " ".join(args))
