"""`runner_test`: one run of a runner (kv_cache_decode_check, cross_attn_decode_check) with its
expected exit and output."""

_RUNNER = "//examples:kv_cache_decode_check"

def _quote(text):
    # sh_test args go through the shell: quote each expected text as one word.
    return "\"%s\"" % text if "'" in text else "'%s'" % text

def runner_test(name, exit_code, expect, model = None, reference = None, flags = [], size = "small",
                runner = _RUNNER, data = []):
    """An sh_test that runs the runner and checks its exit code and output (expect_exit.sh).

    Args:
      name: the test.
      exit_code: the exit the runner must return (0 PASS, 1 a failed check, 2 bad input).
      expect: fixed strings the runner's combined output must all contain.
      model: label of the .pte given with --model (omitted if None).
      reference: label of the reference JSON given with --reference, or a plain path that is
        not a label (a file that does not exist) when it starts with no "/" or ":".
      flags: further runner arguments, passed verbatim.
      size: the test size.
      runner: label of the runner binary.
      data: further files the flags name (as $(rootpath ...)).
    """
    args = [str(exit_code), _quote(expect[0])]
    for text in expect[1:]:
        args += ["--and", _quote(text)]
    args.append("$(rootpath %s)" % runner)
    data = [runner] + data
    if model:
        args += ["--model", "$(rootpath %s)" % model]
        data.append(model)
    if reference:
        if reference.startswith("//") or reference.startswith(":"):
            args += ["--reference", "$(rootpath %s)" % reference]
            data.append(reference)
        else:
            args += ["--reference", reference]
    native.sh_test(
        name = name,
        size = size,
        srcs = ["expect_exit.sh"],
        args = args + flags,
        data = data,
    )

def runner_tests(cases, **common):
    """A runner_test per case: `cases` are dicts of runner_test's arguments, each taking the
    arguments in `common` it does not set itself. A case's `program` P stands for --model
    //examples:P.pte with --reference //examples:P_reference.json."""
    for case in cases:
        args = dict(common)
        args.update(case)
        program = args.pop("program", None)
        if program:
            args["model"] = "//examples:%s.pte" % program
            args["reference"] = "//examples:%s_reference.json" % program
        runner_test(**args)
