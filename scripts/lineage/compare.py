#!/usr/bin/env python3
"""Compares what an earlier commit's templates emitted with what this tree's emit, and writes
that commit's section of templates/lineage.txt (the format is gen/gen.h's, gen_emits_as).

scripts/lineage.sh runs it; see there.  Inputs: both trees (their NVRTC fixed options and the
launch description's structs are compared first), both emit_all outputs, the commit.  A
template's section lines: "T OLD NEW" when every kernel the earlier version emitted is emitted
byte-identically now (source and launch description), plus one exception line per kernel that
differs or no longer emits; a template with more than --max-exceptions exceptions is left out
(its earlier rows are then stale), and so is every template when the NVRTC options differ.
The section "# begin COMMIT" .. "# end COMMIT" is replaced (appended the first time), so a rerun
replaces what the last one wrote and other commits' sections stay.
"""
import argparse
import collections
import os
import re
import sys

HEADER = """\
# lineage.txt -- rows measured with earlier versions of these templates that measured the kernel
# a template emits now: "template earlier-hash current-hash" for every config, and the
# exceptions "template earlier-hash current-hash dtype layout params" (format: gen/gen.h,
# gen_emits_as).  Written by scripts/lineage.sh EARLIER_COMMIT, which emits every config of both
# versions and compares them; rerun it after a template change (a line whose current hash is no
# longer its template's does nothing).
"""
EXAMPLES = 3
LAUNCH_STRUCTS = ("gen_grid_dim", "gen_requires", "gen_tensor_map", "gen_kernel")


def fixed_options(tree):
    """The text of runtime/rt_compile.c's k_fixed_options initializer, blanks squeezed."""
    path = os.path.join(tree, "runtime", "rt_compile.c")
    with open(path, encoding="utf-8") as f:
        m = re.search(r"k_fixed_options\[\]\s*=\s*\{(.*?)\};", f.read(), re.S)
    if not m:
        sys.exit(f"lineage: no k_fixed_options in {path}")
    return " ".join(m.group(1).split())


def launch_structs(tree):
    """The declarations of gen.h's launch structs, comments and blanks removed."""
    path = os.path.join(tree, "gen", "gen.h")
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    out = {}
    for name in LAUNCH_STRUCTS:
        m = re.search(r"typedef struct \{([^{}]*)\}\s*" + name + r"\s*;", text)
        if not m:
            sys.exit(f"lineage: no typedef of {name} in {path}")
        out[name] = " ".join(m.group(1).split())
    return out


def read_emitted(path):
    """{template: hash}, {template: path}, {template: count line}, {(t, dtype, layout, params):
    (source hash, launch hash)}, {template: default params text}."""
    hashes, paths, counts, kernels, defaults = {}, {}, {}, {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            field = line.split()
            if line.startswith("# template "):
                hashes[field[2]], paths[field[2]] = field[3], field[4]
            elif line.startswith("# default "):
                defaults[field[2]] = field[3]
            elif line.startswith("# count "):
                counts[field[2]] = " ".join(field[3:])
            elif field and not line.startswith("#"):
                kernels[tuple(field[:4])] = (field[4], field[5])
    return hashes, paths, counts, kernels, defaults


def as_now(params, default):
    """An earlier config's text as this tree names that config: gen_config_parse keeps the
    default of a parameter the text does not name, so a parameter added since takes its default
    (in this tree's order).  Unchanged when a name is no longer a parameter, or without a
    default line (an earlier emit_all)."""
    if not default:
        return params
    was = dict(f.split("=", 1) for f in params.split(","))
    now = [f.split("=", 1) for f in default.split(",")]
    if any(name not in dict(now) for name in was):
        return params
    return ",".join(f"{name}={was.get(name, value)}" for name, value in now)


def compare_template(name, old, new, default=None):
    """Kernels of the earlier version, by kind: 'same', 'source', 'launch', 'both', 'gone';
    and the exception keys, sorted.  default: this tree's default config text of the template."""
    kinds = collections.Counter()
    examples = collections.defaultdict(list)
    exceptions = []
    for key, (src, launch) in old.items():
        if key[0] != name:
            continue
        now = new.get(key[:3] + (as_now(key[3], default),))
        if now is None:
            kind = "gone"
        elif now == (src, launch):
            kind = "same"
        elif now[1] == launch:
            kind = "source"
        elif now[0] == src:
            kind = "launch"
        else:
            kind = "both"
        kinds[kind] += 1
        if kind != "same":
            exceptions.append(key)
            if len(examples[kind]) < EXAMPLES:
                examples[kind].append(" ".join(key[1:]))
    return kinds, examples, sorted(exceptions)


def kinds_text(kinds):
    order = ("same", "source", "launch", "both", "gone")
    return ", ".join(f"{k} {kinds[k]}" for k in order if kinds[k])


def section(args, old_emitted, new_emitted, old_opts, new_opts):
    """The commit's section, and the report printed for it."""
    old_hashes, _, old_counts, old_kernels, _ = old_emitted
    new_hashes, _, new_counts, new_kernels, new_defaults = new_emitted
    lines = [f"# begin {args.commit}"]
    report = []
    options_same = old_opts == new_opts
    if not options_same:
        msg = f"no lineage: NVRTC fixed options differ (old {{{old_opts}}}, new {{{new_opts}}})"
        lines.append("# " + msg)
        report.append(msg)
    for name in sorted(old_hashes):
        old_hash = old_hashes[name]
        kinds, examples, exceptions = compare_template(name, old_kernels, new_kernels,
                                                       new_defaults.get(name))
        total = sum(kinds.values())
        head = f"{name} {old_hash} -> {new_hashes.get(name, 'none')}: {total} kernels ({kinds_text(kinds)})"
        report.append(head)
        report.append(f"  old: {old_counts.get(name, '?')}")
        report.append(f"  new: {new_counts.get(name, '?')}")
        for kind, keys in sorted(examples.items()):
            for key in keys:
                report.append(f"  e.g. {kind}: {key}")
        if not options_same:
            continue
        if name not in new_hashes:
            why = "no template of that name now"
        elif new_hashes[name] == old_hash:
            why = "unchanged (its own hash)"
        elif len(exceptions) > args.max_exceptions:
            why = f"left out: {len(exceptions)} exceptions > {args.max_exceptions}; its rows are stale"
        else:
            why = None
        if why:
            lines.append(f"# {name} {old_hash}: {total} kernels, {kinds_text(kinds)}: {why}")
            report.append(f"  {why}")
            continue
        lines.append(f"# {name}: {total} kernels compared: {kinds_text(kinds)}")
        lines.append(f"{name} {old_hash} {new_hashes[name]}")
        lines.extend(f"{name} {old_hash} {new_hashes[name]} {' '.join(key[1:])}" for key in exceptions)
        report.append(f"  lineage: 1 line, {len(exceptions)} exceptions")
    lines.append(f"# end {args.commit}")
    return lines, report


def rewrite(path, commit, lines):
    """lineage.txt with the commit's section replaced by lines, in place (appended where the
    file had none)."""
    out, inside, replaced = [], False, False
    old = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read().splitlines()
    for line in old:
        if line == f"# begin {commit}":
            inside = True
            if not replaced:
                out.extend(lines)
                replaced = True
        elif line == f"# end {commit}":
            inside = False
        elif not inside:
            out.append(line)
    if not out:
        out = HEADER.splitlines()
    if not replaced:
        while out and not out[-1].strip():
            out.pop()
        out += [""] + lines
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old-tree", required=True)
    p.add_argument("--new-tree", required=True)
    p.add_argument("--old", required=True, help="emit_all output of the earlier tree")
    p.add_argument("--new", required=True, help="emit_all output of this tree")
    p.add_argument("--commit", required=True, help="the earlier commit (full hash)")
    p.add_argument("--lineage", required=True, help="the lineage.txt to update")
    p.add_argument("--max-exceptions", type=int, default=200)
    p.add_argument("--sampled", action="store_true", help="a sample: report, write nothing")
    args = p.parse_args()

    old_structs, new_structs = launch_structs(args.old_tree), launch_structs(args.new_tree)
    for name in LAUNCH_STRUCTS:
        # Fields appended to a struct are fine (gen_launch.c, compiled against this tree's
        # gen.h for an earlier tree without it, reads only the fields both have, at the same
        # offsets); any other change is not.
        old, new = old_structs[name], new_structs[name]
        if old != new and not (name == "gen_kernel" and new.startswith(old + " ")):
            sys.exit(f"lineage: {name} differs between the trees; emit_all's launch description "
                     "reads the fields both have: extend it first")
    old_opts, new_opts = fixed_options(args.old_tree), fixed_options(args.new_tree)
    print(f"NVRTC fixed options: old {{{old_opts}}}, new {{{new_opts}}}")
    old_emitted, new_emitted = read_emitted(args.old), read_emitted(args.new)
    for name, path in new_emitted[1].items():
        if not path.startswith(os.path.join(args.new_tree, "templates") + "/"):
            sys.exit(f"lineage: {name} came from {path}, outside {args.new_tree}/templates")
    for name, path in old_emitted[1].items():
        if not path.startswith(os.path.join(args.old_tree, "templates") + "/"):
            sys.exit(f"lineage: {name} came from {path}, outside {args.old_tree}/templates")
    lines, report = section(args, old_emitted, new_emitted, old_opts, new_opts)
    print("\n".join(report))
    if args.sampled:
        print("a sample (--every): lineage.txt left as it was")
    else:
        rewrite(args.lineage, args.commit, lines)
        print(f"wrote the section {args.commit} of {args.lineage}: "
              f"{sum(1 for l in lines if l and not l.startswith('#'))} lines")


if __name__ == "__main__":
    main()
