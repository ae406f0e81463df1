import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asError, errnoCode, errorMessage, isRecord } from '../../src/core/unknown-values.js';

describe('unknown values', () => {
  it('isRecord takes mappings only: not null, arrays or scalars', () => {
    assert.deepEqual([{}, { a: 1 }, Object.create(null), null, [], [1], 'x', 3, undefined].map(isRecord), [
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it("errorMessage is an Error's message and anything else as text", () => {
    assert.equal(errorMessage(new TypeError('bad type')), 'bad type');
    assert.equal(errorMessage('plain'), 'plain');
    assert.equal(errorMessage(42), '42');
    assert.equal(errorMessage(undefined), 'undefined');
  });

  it('asError keeps an Error and wraps anything else', () => {
    const error = new RangeError('out of range');
    assert.equal(asError(error), error);
    const wrapped = asError('plain');
    assert.ok(wrapped instanceof Error);
    assert.equal(wrapped.message, 'plain');
    assert.equal(asError(undefined).message, 'undefined');
  });

  it('errnoCode reads the code of system errors only', () => {
    const enoent = Object.assign(new Error('no such file'), { code: 'ENOENT' });
    assert.equal(errnoCode(enoent), 'ENOENT');
    assert.equal(errnoCode(Object.assign(new Error('numeric'), { code: 5 })), undefined);
    assert.equal(errnoCode({ code: 'ENOENT' }), undefined, 'not an Error');
    assert.equal(errnoCode(new Error('none')), undefined);
  });
});
