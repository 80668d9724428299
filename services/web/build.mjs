#!/usr/bin/env node
// Build the wirelens browser page: index.html + one self-contained app.js.
//
//   npm ci && npm run build              -> ../../build/web/{index.html,app.js}
//   WIRELENS_WEB_OUT=/some/dir npm run build
//
// The page's message types come from the project's .proto files (one source of
// truth): they are parsed here with protobufjs and embedded in app.js as a JSON
// descriptor, which the page loads with protobufjs/light (reflection, no parser,
// no generated code). The google.api.http options travel with it, so the page
// derives each operation's REST route from the same annotations the services use.
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import protobuf from "protobufjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "..", "..");
const PROTO_DIR = join(ROOT, "proto", "wirelens", "v1");
const OUT = resolve(process.env.WIRELENS_WEB_OUT || join(ROOT, "build", "web"));

// The services the page calls. A file that does not exist yet is skipped.
const PROTO_FILES = ["hello.proto", "catalog.proto", "echo.proto"];

export function loadDescriptor(protoDir = PROTO_DIR, files = PROTO_FILES) {
  const root = new protobuf.Root();
  const used = [];
  for (const name of files) {
    const path = join(protoDir, name);
    if (!existsSync(path)) {
      console.warn(`build: ${path} not found, its service is left out of the page`);
      continue;
    }
    // parse() leaves imports alone: google/api/annotations.proto is not needed,
    // its (google.api.http) options are kept as parsed values.
    protobuf.parse(readFileSync(path, "utf8"), root, { keepCase: false });
    used.push(name);
  }
  if (used.length === 0) throw new Error(`no .proto file of ${files.join(", ")} in ${protoDir}`);
  root.resolveAll(); // fails here, naming the type, if a message type is missing
  return { json: root.toJSON(), files: used };
}

async function main() {
  const { json, files } = loadDescriptor();
  mkdirSync(OUT, { recursive: true });

  // The descriptor is a virtual module, so app.js stays one file.
  const descriptorPlugin = {
    name: "wirelens-descriptor",
    setup(build) {
      build.onResolve({ filter: /^wirelens:descriptor$/ }, (args) => ({ path: args.path, namespace: "wirelens" }));
      build.onLoad({ filter: /.*/, namespace: "wirelens" }, () => ({ contents: JSON.stringify(json), loader: "json" }));
    },
  };
  const result = await esbuild.build({
    entryPoints: [join(HERE, "src", "app.js")],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: ["es2020"],
    minify: true,
    legalComments: "eof",
    outfile: join(OUT, "app.js"),
    plugins: [descriptorPlugin],
    logLevel: "warning",
    metafile: true,
  });
  writeFileSync(join(OUT, "index.html"), readFileSync(join(HERE, "src", "index.html")));
  const bytes = result.metafile.outputs[Object.keys(result.metafile.outputs)[0]].bytes;
  console.log(`build: ${join(OUT, "index.html")}, ${join(OUT, "app.js")} (${bytes} bytes; protos: ${files.join(", ")})`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(`build failed: ${err.message || err}`);
    process.exit(1);
  });
}
