// The two tools the tool-calling tests declare, and a check that a returned call names one of
// them with arguments its schema validates (ajv). Every property has a description: some
// templates (Command R+) print them and fail without.
import assert from 'node:assert/strict';

export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', description: 'City', maxLength: 20 },
          unit: { type: 'string', description: 'Unit', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      description: 'Add two integers',
      parameters: {
        type: 'object',
        properties: {
          a: { type: 'integer', description: 'A', minimum: -1000, maximum: 1000 },
          b: { type: 'integer', description: 'B', minimum: -1000, maximum: 1000 },
        },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  },
];

// A function (call, names) that asserts the call is valid.
export async function callValidator() {
  const { default: Ajv } = await import('ajv');
  const ajv = new Ajv({ strict: true });
  const validators = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
  return (call, names = ['get_weather', 'add']) => {
    assert.equal(call.type, 'function');
    assert.ok(names.includes(call.function.name), `unexpected tool ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);
    const validate = validators[call.function.name];
    assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
  };
}
