"""mutation_tests: verify_tests on deliberately broken candidates that must FAIL."""

load("//rules:defs.bzl", "verify_test")

def mutation_tests(prefix, elf, goldens, cases, weights = None, prompts = 2, size = "medium", tags = [],
                   tokenizer = None, kld_scheme = ""):
    """One test `<prefix>_<mutation>` per (mutation, caught_by) in `cases`.

    Each runs verify on `elf` with --test_mutation (verify/mutations.h) and
    teacher-forced only (greedy = False: one run, the same gate verdict) and passes
    only if verify fails with every check in caught_by failing. kld_scheme (with
    tokenizer): verify's KLD gate too, for a stage at or after quantize_weights.
    """
    for mutation, caught_by in cases:
        verify_test(
            name = "%s_%s" % (prefix, mutation),
            elf = elf,
            goldens = goldens,
            weights = weights,
            prompts = prompts,
            greedy = False,
            mutation = mutation,
            caught_by = caught_by,
            tokenizer = tokenizer,
            kld_scheme = kld_scheme,
            size = size,
            tags = tags,
        )
