// What Node adds to the browser-safe library: its devices (CPU, DISK) and BEAM results kept on disk.
import { beamStore } from './codegen/opt/search.ts';
import { readCachedText, writeCachedText } from './runtime/diskcache.ts';
import './runtime/node.ts';

// BEAM's results outlive the process in the disk cache, beside the kernels
beamStore.read = (key) => readCachedText(key, '.beam.json');
beamStore.write = (key, text) => writeCachedText(key, '.beam.json', text);
