// Builds the web UI into one file, dist/index.html.gz: src/index.html with the bundled, minified
// script and style inlined (no other request, no CDN: the page works offline), gzip-compressed.
// llama-server embeds that file at build time (examples/server/CMakeLists.txt), so building Kiln
// needs no npm; run ./build.sh after changing anything here and commit the result.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { WEBUI_DIR, sourceHash } from './source-hash.mjs';

const out = await esbuild.build({
  entryPoints: [path.join(WEBUI_DIR, 'src/main.js')],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome100', 'firefox100', 'safari15'],
  legalComments: 'eof',          // the packages' licence headers stay in the bundle
  outdir: 'out',                 // names only: nothing is written
  write: false,
  logLevel: 'warning',
});
const text = (ext) => out.outputFiles.filter((f) => f.path.endsWith(ext)).map((f) => f.text).join('\n');
const js = text('.js');
const css = text('.css');

// The page inlines both: a closing tag inside them would end the element early.
for (const [name, code, tag] of [['script', js, '</script'], ['style', css, '</style']]) {
  if (code.toLowerCase().includes(tag)) throw new Error(`the bundled ${name} contains "${tag}": it cannot be inlined`);
}

const template = fs.readFileSync(path.join(WEBUI_DIR, 'src/index.html'), 'utf8');
const html = template
  .replace(/<!-- build\.mjs[^>]*-->\n/g, '')
  // functions as replacements: the bundle's "$&" and friends must stay as they are
  .replace('/*STYLE*/', () => css)
  .replace('/*SCRIPT*/', () => js)
  .replace('<html lang="en">', () => `<html lang="en" data-kiln-webui-source="${sourceHash()}">`);

fs.mkdirSync(path.join(WEBUI_DIR, 'dist'), { recursive: true });
// gzip's header holds no time or name here, so the same sources give the same bytes
const gz = zlib.gzipSync(html, { level: 9 });
fs.writeFileSync(path.join(WEBUI_DIR, 'dist/index.html.gz'), gz);
console.log(`dist/index.html.gz: ${html.length} bytes, ${gz.length} compressed`);
