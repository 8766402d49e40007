// Runs the enclosing describe block (or file) with Device.default set to a device, restored afterwards.
import { afterAll, beforeAll } from 'vitest';
import { Device } from '../src/runtime/device.ts';

export function useDefaultDevice(device: string): void {
  let previous: string;
  beforeAll(() => {
    previous = Device.default;
    Device.default = device;
  });
  afterAll(() => {
    Device.default = previous;
  });
}
