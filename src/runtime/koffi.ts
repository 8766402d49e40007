// koffi, the native-call module, loaded on first use so that the JS and NULL devices run without it.
import { createRequire } from 'node:module';

type Koffi = typeof import('koffi');
let koffiModule: Koffi | undefined;

export const koffi = (): Koffi => (koffiModule ??= createRequire(import.meta.url)('koffi') as Koffi);
