# Runs what bench/cuda_check.ts wrote on a GPU: compiles each kernel's CUDA C with nvcc for this GPU's
# architecture, runs a program's kernels in order through the driver API (ctypes), and compares the output with
# the JS device's. Usage: python3 bench/cuda_check.py DIR
import base64, ctypes, json, os, subprocess, sys
import numpy as np

d = sys.argv[1]
cuda = ctypes.CDLL('libcuda.so.1')

def ok(r, what):
    if r != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(name))
        raise RuntimeError(f'{what}: {name.value.decode() if name.value else r}')

ok(cuda.cuInit(0), 'cuInit')
dev = ctypes.c_int()
ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), 'cuDeviceGet')
major, minor = ctypes.c_int(), ctypes.c_int()
ok(cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), 'cc major')
ok(cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), 'cc minor')
arch = f'sm_{major.value}{minor.value}'
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), 'ctx')
ok(cuda.cuCtxSetCurrent(ctx), 'set ctx')

DT = {'float32': np.float32, 'float16': np.float16, 'float64': np.float64, 'int32': np.int32, 'int64': np.int64,
      'uint8': np.uint8, 'bool': np.bool_, 'uint32': np.uint32, 'int8': np.int8, 'int16': np.int16,
      'bfloat16': np.uint16}  # bfloat16: its bits, widened to float32 to compare

def values(raw, dtype):
    a = np.frombuffer(raw, dtype=DT[dtype])
    return (a.astype(np.uint32) << 16).view(np.float32) if dtype == 'bfloat16' else a
manifest = json.load(open(os.path.join(d, 'manifest.json')))
files = [os.path.join(d, f'{k["name"]}.cu') for p in manifest for k in p['kernels']]
subprocess.run(['nvcc', f'-arch={arch}', '-cubin', '-odir', d, *files], check=True)

rows = []
for p in manifest:
    ptrs = []
    for b in p['buffers']:
        dt = np.dtype(DT[b['dtype']])
        ptr = ctypes.c_uint64()
        ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), max(1, b['size'] * dt.itemsize)), 'alloc')
        if 'data' in b:
            raw = base64.b64decode(b['data'])
            ok(cuda.cuMemcpyHtoD_v2(ptr, raw, len(raw)), 'HtoD')
        else:  # poison: every element must be written
            ok(cuda.cuMemsetD8_v2(ptr, 0xFF, b['size'] * dt.itemsize), 'poison')
        ptrs.append(ptr)
    for k in p['kernels']:
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        ok(cuda.cuModuleLoadData(ctypes.byref(mod), open(os.path.join(d, f'{k["name"]}.cubin'), 'rb').read()), 'load ' + k['name'])
        ok(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, k['name'].encode()), 'function')
        args = [ctypes.c_uint64(ptrs[r].value) for r in k['refs']]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        ok(cuda.cuLaunchKernel(fn, *k['grid'], *k['block'], 0, None, params, None), 'launch ' + k['name'])
        ok(cuda.cuCtxSynchronize(), 'sync ' + k['name'])
    e = p['expected']
    raw = base64.b64decode(e['data'])
    want = values(raw, e['dtype'])
    got_raw = ctypes.create_string_buffer(len(raw))
    ok(cuda.cuMemcpyDtoH_v2(got_raw, ptrs[p['output']], len(raw)), 'DtoH')
    got = values(got_raw.raw, e['dtype'])
    if want.dtype.kind == 'f':
        w, g = want.astype(np.float64), got.astype(np.float64)
        err = float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30)) if np.all(np.isfinite(g)) else float('inf')
        # the tensor cores' tolerances come with the program (tf32 inputs keep 10 bits of mantissa)
        good = err < (p.get('tolerance') or (1e-2 if e['dtype'] in ('float16', 'bfloat16') else 1e-5))
    else:
        err = float(np.sum(got != want))
        good = err == 0
    rows.append((p['program'], len(p['kernels']), e['dtype'], err, good))
    for ptr in ptrs:
        cuda.cuMemFree_v2(ptr)

print(f'GPU {arch}')
print(f'{"program":<18}{"kernels":>8}  {"dtype":<8}{"error":>12}  ok')
for name, n, dt, err, good in rows:
    print(f'{name:<18}{n:>8}  {dt:<8}{err:>12.3g}  {"yes" if good else "NO"}')
sys.exit(0 if all(r[4] for r in rows) else 1)
