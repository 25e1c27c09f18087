#!/usr/bin/env python3
"""Rewrites the CUDA launches of a .cu source for the emulated build.

    kernel<<<grid, block, bytes, stream>>>(args)
becomes
    ::cg_emu::launch(kernel, "kernel", grid, block, bytes, stream)(args)

which is plain C++ (emulator/launch.h). Nothing else changes, and no line is added or removed, so
the compiler's line numbers stay those of the original (a #line directive names it).
Usage: translate_launches.py SOURCE OUTPUT
"""
import os
import sys


def kernel_start(text, end):
    """Index where the kernel expression ending just before `end` starts: an identifier, possibly
    qualified (a::b) and with template arguments (k<T, 4>)."""
    i = end
    while True:
        if i > 0 and text[i - 1] == '>':  # template arguments: skip to the matching '<'
            depth = 0
            while i > 0:
                i -= 1
                if text[i] == '>':
                    depth += 1
                elif text[i] == '<':
                    depth -= 1
                    if depth == 0:
                        break
        while i > 0 and (text[i - 1].isalnum() or text[i - 1] == '_'):
            i -= 1
        if i > 1 and text[i - 2:i] == '::':
            i -= 2
            continue
        return i


def translate(text):
    out, pos = [], 0
    while True:
        open_ = text.find('<<<', pos)
        if open_ < 0:
            out.append(text[pos:])
            return ''.join(out)
        close = text.find('>>>', open_)
        if close < 0:
            raise SystemExit('translate_launches: <<< without >>>')
        start = kernel_start(text, open_)
        kernel = text[start:open_]
        if not kernel.strip():
            raise SystemExit(f'translate_launches: no kernel name before <<< at offset {open_}')
        config = text[open_ + 3:close]
        name = ' '.join(kernel.split())
        out.append(text[pos:start])
        out.append(f'::cg_emu::launch({kernel}, "{name}", {config})')
        pos = close + 3


def main():
    source, output = sys.argv[1], sys.argv[2]
    with open(source) as f:
        text = f.read()
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, 'w') as f:
        f.write(f'#line 1 "{source}"\n')
        f.write(translate(text))


if __name__ == '__main__':
    main()
