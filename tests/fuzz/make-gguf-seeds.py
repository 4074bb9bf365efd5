#!/usr/bin/env python3
"""Writes the GGUF seeds of fuzz-gguf (corpus/fuzz-gguf/): small files that reach every value
type, tensor data of a plain and a block type, and the three tokenizer families, so the fuzzer
starts from files the reader accepts. Run once; the output is committed."""
import os
import struct
import sys

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)


def s(text):
    b = text.encode()
    return struct.pack('<Q', len(b)) + b


def value(t, v):
    fmt = {T_U8: 'B', T_I8: 'b', T_U16: 'H', T_I16: 'h', T_U32: 'I', T_I32: 'i', T_F32: 'f',
           T_BOOL: '?', T_U64: 'Q', T_I64: 'q', T_F64: 'd'}
    if t == T_STR:
        return s(v)
    if t == T_ARR:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(value(et, x) for x in items)
    return struct.pack('<' + fmt[t], v)


def gguf(kvs, tensors, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, dims, data bytes)]"""
    out = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += s(key) + struct.pack('<I', t) + value(t, v)
    offset = 0
    blobs = b''
    for name, gt, dims, data in tensors:
        out += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        out += struct.pack('<IQ', gt, offset)
        pad = (-len(data)) % alignment
        blobs += data + b'\0' * pad
        offset += len(data) + pad
    out += b'\0' * ((-len(out)) % alignment)
    return out + blobs


def main(dest):
    seeds = {}
    seeds['every-type.gguf'] = gguf(
        [('general.architecture', T_STR, 'llama'), ('a.u8', T_U8, 7), ('a.i8', T_I8, -7), ('a.u16', T_U16, 700),
         ('a.i16', T_I16, -700), ('a.u32', T_U32, 70000), ('a.i32', T_I32, -70000), ('a.f32', T_F32, 0.5),
         ('a.bool', T_BOOL, True), ('a.u64', T_U64, 1 << 40), ('a.i64', T_I64, -(1 << 40)), ('a.f64', T_F64, 0.25),
         ('a.arr_i32', T_ARR, (T_I32, [1, -2, 3])), ('a.arr_str', T_ARR, (T_STR, ['x', '', 'yz'])),
         ('a.arr_empty', T_ARR, (T_F32, []))],
        [('w.f32', 0, [4, 2], struct.pack('<8f', *range(8))),
         ('w.q8_0', 8, [32, 1], struct.pack('<e', 0.5) + bytes(range(32)))])
    seeds['aligned-64.gguf'] = gguf([('general.alignment', T_U32, 64)],
                                    [('t', 1, [3], struct.pack('<3e', 1, 2, 3))], alignment=64)
    bytes_tokens = ['!', '"', 'a', 'b', 'c', 'ab', 'abc', '\u0120', '\u0120a', '<|im_start|>']
    seeds['vocab-bpe.gguf'] = gguf(
        [('tokenizer.ggml.model', T_STR, 'gpt2'), ('tokenizer.ggml.pre', T_STR, 'qwen2'),
         ('tokenizer.ggml.tokens', T_ARR, (T_STR, bytes_tokens)),
         ('tokenizer.ggml.token_type', T_ARR, (T_I32, [1] * 9 + [3])),
         ('tokenizer.ggml.merges', T_ARR, (T_STR, ['a b', 'ab c', '\u0120 a'])),
         ('tokenizer.ggml.eos_token_id', T_U32, 9)], [])
    seeds['vocab-spm.gguf'] = gguf(
        [('tokenizer.ggml.model', T_STR, 'llama'),
         ('tokenizer.ggml.tokens', T_ARR, (T_STR, ['<unk>', '<s>', '</s>', '<0x41>', '\u2581', '\u2581a', 'b', 'ab'])),
         ('tokenizer.ggml.scores', T_ARR, (T_F32, [0, 0, 0, -1, -2, -0.5, -3, -0.25])),
         ('tokenizer.ggml.token_type', T_ARR, (T_I32, [2, 3, 3, 6, 1, 1, 1, 1])),
         ('tokenizer.ggml.bos_token_id', T_U32, 1), ('tokenizer.ggml.add_bos_token', T_BOOL, True)], [])
    seeds['vocab-wpm.gguf'] = gguf(
        [('tokenizer.ggml.model', T_STR, 'bert'),
         ('tokenizer.ggml.tokens', T_ARR, (T_STR, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', 'hello', '##s', 'world', ','])),
         ('tokenizer.ggml.token_type', T_ARR, (T_I32, [3, 2, 3, 3, 1, 1, 1, 1])),
         ('tokenizer.ggml.unknown_token_id', T_U32, 1), ('tokenizer.ggml.cls_token_id', T_U32, 2),
         ('tokenizer.ggml.seperator_token_id', T_U32, 3)], [])
    os.makedirs(dest, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(dest, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus', 'fuzz-gguf'))
