// Kubernetes label selectors (the `labelSelector` query parameter): a port of the lexer and parser
// in k8s.io/apimachinery/pkg/labels/selector.go, with the same grammar, the same validation and the
// same error messages the apiserver answers a bad selector with (400 BadRequest).
//
//   selector    = [ requirement { "," requirement } ]
//   requirement = [ "!" ] KEY
//               | KEY ( "=" | "==" | "!=" | ">" | "<" ) [ VALUE ]
//               | KEY ( "in" | "notin" ) "(" [ VALUE { "," [ VALUE ] } ] ")"
import { aggregate, goQuote, labelValueErrors, qualifiedNameErrors } from './validation.js';

export type SelectorOperator = 'in' | 'notin' | '=' | '==' | '!=' | 'exists' | '!' | 'gt' | 'lt';

export interface Requirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  /** Sorted and de-duplicated, like Go's sets.String.List(). */
  readonly values: readonly string[];
}

export interface LabelSelector {
  /** Requirements sorted by key (AND). Empty: matches everything. */
  readonly requirements: readonly Requirement[];
  matches(labels: Readonly<Record<string, string>> | undefined): boolean;
  /** Canonical text (requirements sorted by key), parseable again. */
  toString(): string;
}

/** A selector string the apiserver would reject; `message` is the apiserver's wording. */
export class LabelSelectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LabelSelectorError';
  }
}

const enum Token {
  Error,
  EndOfString,
  ClosedPar,
  Comma,
  DoesNotExist,
  DoubleEquals,
  Equals,
  GreaterThan,
  Identifier,
  In,
  LessThan,
  NotEquals,
  NotIn,
  OpenPar,
}

const STRING_TO_TOKEN = new Map<string, Token>([
  [')', Token.ClosedPar],
  [',', Token.Comma],
  ['!', Token.DoesNotExist],
  ['==', Token.DoubleEquals],
  ['=', Token.Equals],
  ['>', Token.GreaterThan],
  ['in', Token.In],
  ['<', Token.LessThan],
  ['!=', Token.NotEquals],
  ['notin', Token.NotIn],
  ['(', Token.OpenPar],
]);

/** The binary operators, in the order the apiserver's "expected:" message lists them. */
const BINARY_OPERATORS = new Map<Token, SelectorOperator>([
  [Token.In, 'in'],
  [Token.NotIn, 'notin'],
  [Token.Equals, '='],
  [Token.DoubleEquals, '=='],
  [Token.NotEquals, '!='],
  [Token.GreaterThan, 'gt'],
  [Token.LessThan, 'lt'],
]);

function isWhitespace(ch: string): boolean {
  return ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n';
}

function isSpecialSymbol(ch: string): boolean {
  return ch === '=' || ch === '!' || ch === '(' || ch === ')' || ch === ',' || ch === '>' || ch === '<';
}

interface Scanned {
  readonly token: Token;
  readonly literal: string;
}

/** The Go lexer works on bytes; so does this one (UTF-8 code units), which only matters for errors. */
function lex(input: string): Scanned[] {
  const bytes = Buffer.from(input, 'utf8');
  let pos = 0;
  const read = (): string => {
    const ch = pos < bytes.length ? String.fromCharCode(bytes[pos] ?? 0) : '';
    pos++;
    return ch;
  };
  const unread = (): void => {
    pos--;
  };
  const text = (from: number, to: number): string => bytes.subarray(from, to).toString('utf8');
  const items: Scanned[] = [];
  for (;;) {
    let ch = read();
    while (ch !== '' && isWhitespace(ch)) ch = read();
    if (ch === '') {
      items.push({ token: Token.EndOfString, literal: '' });
      return items;
    }
    unread();
    const start = pos;
    if (isSpecialSymbol(ch)) {
      // The longest run of special symbols that still forms a token (`!=`, `==`, …).
      let last: Scanned | undefined;
      for (;;) {
        const c = read();
        if (c === '') break;
        if (!isSpecialSymbol(c)) {
          unread();
          break;
        }
        const candidate = text(start, pos);
        const token = STRING_TO_TOKEN.get(candidate);
        if (token !== undefined) {
          last = { token, literal: candidate };
        } else if (last !== undefined) {
          unread();
          break;
        }
      }
      items.push(last ?? { token: Token.Error, literal: `error expected: keyword found '${text(start, pos)}'` });
    } else {
      for (;;) {
        const c = read();
        if (c === '') break;
        if (isSpecialSymbol(c) || isWhitespace(c)) {
          unread();
          break;
        }
      }
      const literal = text(start, pos);
      items.push({ token: STRING_TO_TOKEN.get(literal) ?? Token.Identifier, literal });
    }
  }
}

class Parser {
  private position = 0;

  constructor(private readonly items: readonly Scanned[]) {}

  /** In a value position the keywords `in` and `notin` are plain identifiers. */
  private static asValue(item: Scanned): Scanned {
    return item.token === Token.In || item.token === Token.NotIn
      ? { token: Token.Identifier, literal: item.literal }
      : item;
  }

  private lookahead(values: boolean): Scanned {
    const item = this.items[Math.min(this.position, this.items.length - 1)] ?? {
      token: Token.EndOfString,
      literal: '',
    };
    return values ? Parser.asValue(item) : item;
  }

  private consume(values: boolean): Scanned {
    const item = this.lookahead(values);
    this.position++;
    return item;
  }

  parse(): Requirement[] {
    const requirements: Requirement[] = [];
    for (;;) {
      const next = this.lookahead(true);
      switch (next.token) {
        case Token.Identifier:
        case Token.DoesNotExist: {
          requirements.push(this.parseRequirementWrapped());
          const after = this.consume(true);
          if (after.token === Token.EndOfString) return requirements;
          if (after.token === Token.Comma) {
            const following = this.lookahead(true);
            if (following.token !== Token.Identifier && following.token !== Token.DoesNotExist) {
              throw new LabelSelectorError(`found '${following.literal}', expected: identifier after ','`);
            }
            break;
          }
          throw new LabelSelectorError(`found '${after.literal}', expected: ',' or 'end of string'`);
        }
        case Token.EndOfString:
          return requirements;
        default:
          throw new LabelSelectorError(`found '${next.literal}', expected: !, identifier, or 'end of string'`);
      }
    }
  }

  private parseRequirementWrapped(): Requirement {
    try {
      return this.parseRequirement();
    } catch (error) {
      if (error instanceof LabelSelectorError) {
        throw new LabelSelectorError(`unable to parse requirement: ${error.message}`);
      }
      throw error;
    }
  }

  private parseRequirement(): Requirement {
    const { key, operator } = this.parseKeyAndInferOperator();
    if (operator === 'exists' || operator === '!') return newRequirement(key, operator, []);
    const op = this.parseOperator();
    const values = op === 'in' || op === 'notin' ? this.parseValues() : this.parseExactValue();
    return newRequirement(key, op, values);
  }

  private parseKeyAndInferOperator(): { key: string; operator: SelectorOperator | undefined } {
    let operator: SelectorOperator | undefined;
    let item = this.consume(true);
    if (item.token === Token.DoesNotExist) {
      operator = '!';
      item = this.consume(true);
    }
    if (item.token !== Token.Identifier) {
      throw new LabelSelectorError(`found '${item.literal}', expected: identifier`);
    }
    const keyErrors = qualifiedNameErrors(item.literal, 'a valid label key');
    if (keyErrors.length > 0) {
      // field.Invalid with a nil path, as the Go parser reports it.
      throw new LabelSelectorError(`<nil>: Invalid value: ${goQuote(item.literal)}: ${keyErrors.join('; ')}`);
    }
    const next = this.lookahead(true).token;
    if ((next === Token.EndOfString || next === Token.Comma) && operator !== '!') operator = 'exists';
    return { key: item.literal, operator };
  }

  private parseOperator(): SelectorOperator {
    const item = this.consume(false);
    const operator = BINARY_OPERATORS.get(item.token);
    if (operator === undefined) {
      throw new LabelSelectorError(`found '${item.literal}', expected: ${[...BINARY_OPERATORS.values()].join(', ')}`);
    }
    return operator;
  }

  private parseValues(): Set<string> {
    const open = this.consume(true);
    if (open.token !== Token.OpenPar) throw new LabelSelectorError(`found '${open.literal}' expected: '('`);
    const next = this.lookahead(true);
    switch (next.token) {
      case Token.Identifier:
      case Token.Comma: {
        const values = this.parseIdentifiersList();
        if (this.consume(true).token !== Token.ClosedPar) {
          throw new LabelSelectorError(`found '${next.literal}', expected: ')'`);
        }
        return values;
      }
      case Token.ClosedPar:
        this.consume(true);
        return new Set(['']);
      default:
        throw new LabelSelectorError(`found '${next.literal}', expected: ',', ')' or identifier`);
    }
  }

  private parseIdentifiersList(): Set<string> {
    const values = new Set<string>();
    for (;;) {
      const item = this.consume(true);
      if (item.token === Token.Identifier) {
        values.add(item.literal);
        const next = this.lookahead(true);
        if (next.token === Token.Comma) continue;
        if (next.token === Token.ClosedPar) return values;
        throw new LabelSelectorError(`found '${next.literal}', expected: ',' or ')'`);
      } else if (item.token === Token.Comma) {
        if (values.size === 0) values.add(''); // "(,"
        const next = this.lookahead(true);
        if (next.token === Token.ClosedPar) {
          values.add(''); // ",)"
          return values;
        }
        if (next.token === Token.Comma) {
          this.consume(true);
          values.add(''); // ",,"
        }
      } else {
        throw new LabelSelectorError(`found '${item.literal}', expected: ',', or identifier`);
      }
    }
  }

  private parseExactValue(): Set<string> {
    const next = this.lookahead(true);
    if (next.token === Token.EndOfString || next.token === Token.Comma) return new Set(['']);
    const item = this.consume(true);
    if (item.token === Token.Identifier) return new Set([item.literal]);
    throw new LabelSelectorError(`found '${item.literal}', expected: identifier`);
  }
}

const INT64 = /^[+-]?\d+$/;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

function parseInt64(value: string): bigint | undefined {
  if (!INT64.test(value)) return undefined;
  const n = BigInt(value);
  return n > INT64_MAX || n < INT64_MIN ? undefined : n;
}

/** labels.NewRequirement: validates the values for the operator and each value as a label value. */
function newRequirement(key: string, operator: SelectorOperator, valueSet: Iterable<string>): Requirement {
  const values = [...new Set(valueSet)].sort();
  const errors: string[] = [];
  if ((operator === 'gt' || operator === 'lt') && values.length === 1) {
    values.forEach((value, i) => {
      if (parseInt64(value) === undefined) {
        errors.push(
          `values[${i}]: Invalid value: ${goQuote(value)}: for 'Gt', 'Lt' operators, the value must be an integer`,
        );
      }
    });
  }
  values.forEach((value, i) => {
    const problems = labelValueErrors(value);
    if (problems.length > 0)
      errors.push(`values[${i}][${key}]: Invalid value: ${goQuote(value)}: ${problems.join('; ')}`);
  });
  if (errors.length > 0) throw new LabelSelectorError(aggregate(errors));
  return { key, operator, values };
}

export function requirementMatches(requirement: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, requirement.key);
  const value = has ? labels[requirement.key] : undefined;
  switch (requirement.operator) {
    case 'in':
    case '=':
    case '==':
      return value !== undefined && requirement.values.includes(value);
    case 'notin':
    case '!=':
      return value === undefined || !requirement.values.includes(value);
    case 'exists':
      return has;
    case '!':
      return !has;
    case 'gt':
    case 'lt': {
      if (value === undefined) return false;
      const actual = parseInt64(value);
      const wanted = parseInt64(requirement.values[0] ?? '');
      if (actual === undefined || wanted === undefined) return false;
      return requirement.operator === 'gt' ? actual > wanted : actual < wanted;
    }
  }
}

function requirementToString(r: Requirement): string {
  switch (r.operator) {
    case 'exists':
      return r.key;
    case '!':
      return `!${r.key}`;
    case 'in':
    case 'notin':
      return `${r.key} ${r.operator} (${r.values.join(',')})`;
    case 'gt':
      return `${r.key}>${r.values[0] ?? ''}`;
    case 'lt':
      return `${r.key}<${r.values[0] ?? ''}`;
    default:
      return `${r.key}${r.operator}${r.values[0] ?? ''}`;
  }
}

class ParsedSelector implements LabelSelector {
  constructor(readonly requirements: readonly Requirement[]) {}

  matches(labels: Readonly<Record<string, string>> | undefined): boolean {
    const actual = labels ?? {};
    return this.requirements.every((r) => requirementMatches(r, actual));
  }

  toString(): string {
    return this.requirements.map(requirementToString).join(',');
  }
}

/** Parses a label selector; throws LabelSelectorError with the apiserver's message when invalid. */
export function parseLabelSelector(text: string): LabelSelector {
  const requirements = new Parser(lex(text)).parse();
  // Stable sort by key, like sort.Sort(ByKey(...)) for distinct keys.
  requirements.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return new ParsedSelector(requirements);
}

/** A selector matching everything. */
export const everything: LabelSelector = new ParsedSelector([]);
