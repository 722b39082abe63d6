// Module resolve hook: every `mote:actor/<interface>@<version>` is the fake host module.
const FAKE = new URL('./wit.js', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier.startsWith('mote:actor/')) return { url: FAKE, shortCircuit: true };
  return next(specifier, context);
}
