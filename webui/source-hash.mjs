// The fingerprint of what the bundle is built from: every file under src/, the lockfile and the
// build script. build.mjs writes it into the bundle; the web UI test (tests/webui) recomputes it
// to catch a source change committed without rebuilding the bundle.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const WEBUI_DIR = path.dirname(fileURLToPath(import.meta.url));

export function sourceHash(dir = WEBUI_DIR) {
  const files = fs.readdirSync(path.join(dir, 'src')).sort().map((f) => path.join('src', f));
  files.push('package-lock.json', 'build.mjs');
  const h = crypto.createHash('sha256');
  for (const f of files) {
    h.update(`${f}\0`);
    h.update(fs.readFileSync(path.join(dir, f)));
    h.update('\0');
  }
  return h.digest('hex');
}
