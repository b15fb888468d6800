"""The tensor-by-tensor walk the requantization checks share (check_requant.py,
check_q8.py): two GGUFs that must hold the same tensor names, compared per tensor by
`compare(name, src_tensor, dst_tensor)` -> (number of differing values or bytes, of
how many) or None for a tensor it cannot compare (then the walk stops)."""
import gguf


def compare_gguf_pair(src_path, dst_path, compare):
    """Prints each differing tensor, the type pairs seen and IDENTICAL (or the count of
    differing tensors); returns the exit status (0 identical, 1 otherwise)."""
    src = {t.name: t for t in gguf.GGUFReader(src_path).tensors}
    dst = {t.name: t for t in gguf.GGUFReader(dst_path).tensors}
    if set(src) != set(dst):
        print(f"tensor names differ: {sorted(set(src) ^ set(dst))}")
        return 1
    bad, counts = 0, {}
    for name in sorted(src):
        s, d = src[name], dst[name]
        key = f"{s.tensor_type.name}->{d.tensor_type.name}"
        counts[key] = counts.get(key, 0) + 1
        result = compare(name, s, d)
        if result is None:
            return 1
        diff, total = result
        if diff:
            bad += 1
            print(f"{name} ({key}): {diff} of {total} differ")
    print(", ".join(f"{k}: {v} tensors" for k, v in sorted(counts.items())))
    print("IDENTICAL" if not bad else f"{bad} tensors differ")
    return 1 if bad else 0
