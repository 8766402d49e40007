// Runs before every test file: tests run as Node users do, with the CPU device registered (src/index.ts does this).
import '../src/node.ts';
