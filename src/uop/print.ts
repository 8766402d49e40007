// Printing UOp graphs: an aligned one-line-per-node listing, and TypeScript code that rebuilds a graph.
import { AddrSpace, DType, dtypes, PtrDType } from '../dtype.ts';
import { AxisType, Ops, opName } from './ops.ts';
import { fmtDim, type Shape } from './shape.ts';
import { UOp } from './uop.ts';

// --- values inside args ---------------------------------------------------------------------------------

/** How each kind of value in an arg is written: the listing and the code differ only here. */
interface ValueStyle {
  dtype(d: DType): string;
  member(enumName: string, memberName: string): string;
  string(s: string): string;
  bytes(b: Uint8Array): string;
  object(entries: readonly (readonly [string, string])[]): string;
  /** A value neither style knows (a class instance other than DType or Uint8Array). */
  other(v: object): string;
}

/** Member names by value, without the reverse entries TypeScript adds to numeric enums. */
function memberNames(e: Record<string, string | number>): ReadonlyMap<unknown, string> {
  return new Map(
    Object.entries(e)
      .filter(([k]) => Number.isNaN(Number(k)))
      .map(([k, v]) => [v, k]),
  );
}

/** Object fields holding enum members; at runtime AxisType.LOOP is just 'LOOP', so the field name tells. */
const enumFields = new Map<string, { enumName: string; names: ReadonlyMap<unknown, string> }>([
  ['type', { enumName: 'AxisType', names: memberNames(AxisType) }],
  ['addrspace', { enumName: 'AddrSpace', names: memberNames(AddrSpace) }],
  ['op', { enumName: 'Ops', names: memberNames(Ops as unknown as Record<string, number>) }],
]);

/** A number as a JS expression: String() already gives NaN, Infinity and exact decimals; -0 needs help. */
const numberText = (n: number): string => (Object.is(n, -0) ? '-0' : String(n));

const isPlainObject = (v: object): boolean => {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

function renderValue(v: unknown, style: ValueStyle, field?: string): string {
  const e = field === undefined ? undefined : enumFields.get(field);
  const member = e?.names.get(v);
  if (e !== undefined && member !== undefined) return style.member(e.enumName, member);
  switch (typeof v) {
    case 'number':
      return numberText(v);
    case 'bigint':
      return `${v}n`;
    case 'boolean':
    case 'undefined':
      return String(v);
    case 'string':
      return style.string(v);
  }
  if (v === null) return 'null';
  if (typeof v !== 'object') return style.other(Object(v));
  if (v instanceof DType) return style.dtype(v);
  if (v instanceof Uint8Array) return style.bytes(v);
  if (Array.isArray(v)) return `[${v.map((x) => renderValue(x, style)).join(', ')}]`;
  if (!isPlainObject(v)) return style.other(v);
  // an absent field and an undefined one are the same arg, so undefined fields are left out
  const entries = Object.entries(v)
    .filter(([, x]) => x !== undefined)
    .map(([k, x]) => [k, renderValue(x, style, k)] as const);
  return style.object(entries);
}

// --- the listing ----------------------------------------------------------------------------------------

const LISTED_BYTES = 16;
const LISTED_STRING_CHARS = 80;

const listingStyle: ValueStyle = {
  dtype: (d) => d.name,
  member: (_, name) => name,
  string: (s) => {
    const text = JSON.stringify(s);
    return text.length <= LISTED_STRING_CHARS
      ? text
      : `${text.slice(0, LISTED_STRING_CHARS)}…(${s.length} chars)`;
  },
  bytes: (b) => {
    const hex = Array.from(b.subarray(0, LISTED_BYTES), (x) => x.toString(16).padStart(2, '0')).join(' ');
    return `<${b.length} bytes${b.length ? ` ${hex}` : ''}${b.length > LISTED_BYTES ? ' …' : ''}>`;
  },
  object: (entries) => `{${entries.map(([k, x]) => `${k}: ${x}`).join(', ')}}`,
  other: (v) => `<${v.constructor?.name ?? 'object'}>`,
};

/** A CONST shows its value only: the dtype has its own column. */
function argText(u: UOp): string {
  if (u.arg === null) return '';
  if (u.op === Ops.CONST) return renderValue(u.argOf(Ops.CONST).value, listingStyle);
  return renderValue(u.arg, listingStyle);
}

/** The last column: the arg, then the tag when one is set (kept together so a long arg pushes no column). */
function argAndTag(u: UOp): string {
  const tag = u.tag === null ? '' : `tag=${renderValue(u.tag, listingStyle)}`;
  return [argText(u), tag].filter((x) => x !== '').join('  ');
}

/** A source's local index; one outside the listing shows its op instead. */
function srcText(u: UOp, index: ReadonlyMap<UOp, number>): string {
  return `[${u.src.map((s) => index.get(s) ?? `<${opName(s.op)}>`).join(', ')}]`;
}

/** Like fmtShape, but a symbolic size that is an expression names its line (`@7`), not its process-wide id. */
function shapeText(shape: Shape | null, index: ReadonlyMap<UOp, number>): string {
  if (shape === null) return 'none';
  const dims = shape.map((d) => {
    const i = typeof d === 'number' || d.op === Ops.PARAM ? undefined : index.get(d);
    return i === undefined ? fmtDim(d) : `@${i}`;
  });
  return `(${dims.join(', ')}${dims.length === 1 ? ',' : ''})`;
}

/** Pads every column to its widest cell (the first, an index, to the right) and joins them with `gap`. */
function alignColumns(rows: readonly string[][], gap: string): string {
  const widths: number[] = [];
  for (const row of rows)
    for (let c = 0; c < row.length; c++) widths[c] = Math.max(widths[c] ?? 0, row[c]!.length);
  const line = (row: string[]) =>
    row
      .map((cell, c) => (c === 0 ? cell.padStart(widths[0]!) : cell.padEnd(widths[c]!)))
      .join(gap)
      .trimEnd();
  return rows.map(line).join('\n');
}

/**
 * One line per node in dependency order: local index, op, dtype, shape, sources (as local indices), arg
 * and, when set, the tag. Local indices make the listing the same in every process.
 */
export function printGraph(root: UOp): string {
  const nodes = root.toposort();
  const index = new Map(nodes.map((u, i) => [u, i]));
  const rows = nodes.map((u, i) => [
    String(i),
    opName(u.op),
    u.dtype.name,
    shapeText(u.shape, index),
    srcText(u, index),
    argAndTag(u),
  ]);
  return alignColumns(rows, '  ');
}

/** A LINEAR's instructions as `index OP : dtype [src indices] arg`, the dtype left blank for void. */
export function printLinear(linear: UOp): string {
  if (linear.op !== Ops.LINEAR) throw new Error(`printLinear: expected a LINEAR, got a ${opName(linear.op)}`);
  const index = new Map(linear.src.map((u, i) => [u, i]));
  const rows = linear.src.map((u, i) => [
    String(i),
    opName(u.op),
    ':',
    u.dtype === dtypes.void ? '' : u.dtype.name,
    srcText(u, index),
    argAndTag(u),
  ]);
  return alignColumns(rows, ' ');
}

// --- code that rebuilds a graph ---------------------------------------------------------------------------

function dtypeCode(d: DType): string {
  if (d instanceof PtrDType) {
    const args =
      d.addrspace !== AddrSpace.GLOBAL
        ? `${d.size}, AddrSpace.${d.addrspace}`
        : d.size !== -1
          ? String(d.size)
          : '';
    return `${dtypeCode(d.pointee)}.ptr(${args})`;
  }
  if (d.count > 1) return `${dtypeCode(d.base)}.vec(${d.count})`;
  if ((dtypes as Record<string, DType>)[d.name] !== d)
    throw new Error(`toCode: dtype ${d.name} is not one of dtypes, so no code names it`);
  return `dtypes.${d.name}`;
}

const keyCode = (k: string): string => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k));

const codeStyle: ValueStyle = {
  dtype: dtypeCode,
  member: (enumName, name) => `${enumName}.${name}`,
  string: (s) => JSON.stringify(s),
  bytes: (b) => `new Uint8Array([${b.join(', ')}])`,
  object: (entries) =>
    entries.length === 0 ? '{}' : `{ ${entries.map(([k, x]) => `${keyCode(k)}: ${x}`).join(', ')} }`,
  other: (v) => {
    throw new Error(`toCode: cannot write a ${v.constructor?.name ?? 'object'} in an arg as code`);
  },
};

const valueCode = (v: unknown): string => renderValue(v, codeStyle);

/** A shorter constructor call for a node, with a thunk that rebuilds the node the same way. */
interface Friendly {
  code: string;
  build: () => UOp;
}

function constForm(u: UOp): Friendly | undefined {
  if (u.op !== Ops.CONST) return undefined;
  const { value, dtype } = u.argOf(Ops.CONST);
  return {
    code: `UOp.const(${dtypeCode(dtype)}, ${valueCode(value)})`,
    build: () => UOp.const(dtype, value),
  };
}

function variableForm(u: UOp): Friendly | undefined {
  if (u.op !== Ops.PARAM || u.src.length !== 3) return undefined;
  const { slot, dtype } = u.argOf(Ops.PARAM);
  const [, lo, hi] = u.src as [UOp, UOp, UOp];
  if (typeof slot !== 'string' || lo.op !== Ops.CONST || hi.op !== Ops.CONST) return undefined;
  const [min, max] = [lo.constValue, hi.constValue];
  if (typeof min !== 'number' || typeof max !== 'number') return undefined;
  const dtypeArg = dtype === dtypes.index ? '' : `, ${dtypeCode(dtype)}`;
  return {
    code: `UOp.variable(${JSON.stringify(slot)}, ${numberText(min)}, ${numberText(max)}${dtypeArg})`,
    build: () => UOp.variable(slot, min, max, dtype),
  };
}

const friendlyForms: readonly ((u: UOp) => Friendly | undefined)[] = [constForm, variableForm];

/** A friendly form is used only where it rebuilds exactly this node (hash-consing makes that `===`). */
function rebuildsExactly(f: Friendly, u: UOp): boolean {
  try {
    return f.build() === u;
  } catch {
    return false;
  }
}

function nodeCode(u: UOp, names: ReadonlyMap<UOp, string>): string {
  for (const form of friendlyForms) {
    const f = form(u);
    if (f !== undefined && rebuildsExactly(f, u)) return f.code;
  }
  const args = [`Ops.${opName(u.op)}`, `[${u.src.map((s) => names.get(s)).join(', ')}]`];
  if (u.arg !== null || u.tag !== null) args.push(valueCode(u.arg));
  if (u.tag !== null) args.push(valueCode(u.tag));
  return `UOp.make(${args.join(', ')})`;
}

/**
 * TypeScript that rebuilds the graph: one `const nK = ...;` per node in dependency order, then a last
 * line holding the root's name. It needs `UOp`, `Ops`, `dtypes`, `AddrSpace` and `AxisType` in scope.
 */
export function toCode(root: UOp): string {
  const names = new Map<UOp, string>();
  const lines: string[] = [];
  for (const u of root.toposort()) {
    const name = `n${names.size}`;
    lines.push(`const ${name} = ${nodeCode(u, names)};`);
    names.set(u, name);
  }
  lines.push(`${names.get(root)};`);
  return lines.join('\n');
}

const codeBindings = { UOp, Ops, dtypes, AddrSpace, AxisType };

/** Statements one function runs in fromCode: V8 gives every `const` of a function a slot of its stack frame. */
const STATEMENTS_PER_CALL = 10_000;

/**
 * Runs code in the form toCode writes (statements, then the result on the last line) and returns the node.
 * Long code runs in pieces of STATEMENTS_PER_CALL lines (one statement a line, as toCode writes), whose names
 * reach later pieces through one table, so a graph of any size fits the stack.
 */
export function fromCode(code: string): UOp {
  const lines = code.trimEnd().split('\n');
  const result = lines.pop()!;
  const table: Record<string, unknown> = {};
  const run = (body: string, returned: string): unknown => {
    const used = [...new Set(`${body}\n${returned}`.match(/[A-Za-z_$][\w$]*/g))].filter((n) =>
      Object.hasOwn(table, n),
    );
    const fn = new Function(
      '$earlier',
      ...Object.keys(codeBindings),
      `const { ${used.join(', ')} } = $earlier;\n${body}\nreturn ${returned}`,
    ) as (...bindings: unknown[]) => unknown;
    return fn(table, ...Object.values(codeBindings));
  };
  // every piece but the last runs for the names it declares; the last gives the result
  let start = 0;
  for (; lines.length - start > STATEMENTS_PER_CALL; start += STATEMENTS_PER_CALL) {
    const piece = lines.slice(start, start + STATEMENTS_PER_CALL);
    const declared = piece.flatMap((l) => /^const ([A-Za-z_$][\w$]*) =/.exec(l)?.[1] ?? []);
    Object.assign(table, run(piece.join('\n'), `{ ${declared.join(', ')} };`));
  }
  const out = run(lines.slice(start).join('\n'), result);
  if (!(out instanceof UOp)) throw new Error(`fromCode: the code's last line gave ${String(out)}, not a UOp`);
  return out;
}
