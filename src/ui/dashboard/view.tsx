// Presentational ink components: they render a DashboardState, nothing else. Every line is one
// <Text wrap="truncate-end">, inside boxes of fixed height, so a narrow or short terminal cuts
// lines and rows off instead of wrapping them into garbage.
import { Box, Text } from 'ink';
import type { ReactNode } from 'react';
import { layoutOf, overlayInnerWidth, overlayWidth } from './model.js';
import type { DashboardState } from './model.js';
import {
  cleanupsSection,
  configLines,
  devicesSection,
  diffLine,
  errorLines,
  eventsSection,
  fleetLine,
  helpLines,
  keysLine,
  lastReloadLine,
  lineText,
  sliceLine,
  statusLine,
  titleLine,
  tooSmallLine,
  volumesSection,
} from './lines.js';
import type { Line, Section, Tone } from './lines.js';

interface ToneStyle {
  readonly color?: string;
  readonly bold?: boolean;
  readonly dimColor?: boolean;
}

const TONES: Readonly<Record<Tone, ToneStyle>> = {
  plain: {},
  title: { bold: true },
  focus: { bold: true, color: 'cyan' },
  dim: { dimColor: true },
  ok: { color: 'green' },
  warn: { color: 'yellow' },
  bad: { color: 'red' },
  accent: { color: 'cyan' },
  added: { color: 'green' },
  removed: { color: 'red' },
  hunk: { color: 'cyan' },
  key: { bold: true },
};

export function LineView({ line, color }: { readonly line: Line; readonly color: boolean }): ReactNode {
  // Never an empty <Text>: it would take no row.
  if (!color || line.length === 0) return <Text wrap="truncate-end">{lineText(line) || ' '}</Text>;
  return (
    <Text wrap="truncate-end">
      {line.map((s, i) => (
        // Segments never reorder: the index is a stable key.
        <Text key={i} {...TONES[s.tone ?? 'plain']}>
          {s.text}
        </Text>
      ))}
    </Text>
  );
}

function Lines({ lines, color }: { readonly lines: readonly Line[]; readonly color: boolean }): ReactNode {
  return lines.map((line, i) => <LineView key={i} line={line} color={color} />);
}

/** A section: its title (and column header), then `height` rows from `offset`. */
function SectionView(props: {
  readonly section: Section;
  readonly height: number;
  readonly offset: number;
  readonly color: boolean;
}): ReactNode {
  const { section, height, offset, color } = props;
  const rows = section.rows.length === 0 ? [section.empty] : section.rows.slice(offset, offset + height);
  return (
    <Box
      flexDirection="column"
      flexShrink={0}
      height={1 + (section.header !== undefined ? 1 : 0) + height}
      overflow="hidden"
    >
      <LineView line={section.title} color={color} />
      {section.header !== undefined && <LineView line={section.header} color={color} />}
      {height > 0 && <Lines lines={rows.slice(0, height)} color={color} />}
    </Box>
  );
}

function OverlayView({ state, color }: { readonly state: DashboardState; readonly color: boolean }): ReactNode {
  const layout = layoutOf(state);
  const overlay = state.overlay;
  if (overlay === undefined) return null;
  const all =
    overlay.kind === 'help'
      ? helpLines()
      : overlay.kind === 'fleet'
        ? overlay.lines.map(fleetLine)
        : overlay.lines.map(diffLine);
  const title = overlay.kind === 'help' ? 'Keys' : overlay.title;
  const offset = state.scroll.overlay;
  const shown = all.slice(offset, offset + layout.overlay).map((line) => sliceLine(line, state.overlayColumn));
  const range = all.length > layout.overlay ? `  ${offset + 1}-${offset + shown.length} of ${all.length}` : '';
  const wide = overlayWidth(state) > overlayInnerWidth(state);
  const column = state.overlayColumn > 0 ? `  from column ${state.overlayColumn + 1}` : '';
  const closer = overlay.kind === 'help' ? '?' : overlay.kind === 'fleet' ? 'f' : 'd';
  const keys = `${closer} or Esc closes${wide ? ', Left/Right scroll' : ''}`;
  const head: Line = [
    { text: title, tone: 'title' },
    { text: `${range}${column}  (${keys})`, tone: 'dim' },
  ];
  return (
    <Box
      flexDirection="column"
      flexShrink={0}
      height={layout.body}
      borderStyle={color ? 'round' : 'classic'}
      overflow="hidden"
    >
      <LineView line={head} color={color} />
      <Lines lines={shown} color={color} />
    </Box>
  );
}

export function DashboardView({
  state,
  color,
}: {
  readonly state: DashboardState;
  readonly color: boolean;
}): ReactNode {
  const { columns, rows } = state.size;
  const layout = layoutOf(state);
  if (layout.tooSmall) {
    return (
      <Box width={columns} height={Math.max(1, Math.min(rows, 1))} overflow="hidden">
        <LineView line={tooSmallLine(state)} color={color} />
      </Box>
    );
  }
  const header = [titleLine(state), ...configLines(state), lastReloadLine(state), ...errorLines(state, layout.errors)];
  return (
    <Box flexDirection="column" width={columns} height={rows} overflow="hidden">
      <Box flexDirection="column" flexShrink={0} height={layout.header} overflow="hidden">
        <Lines lines={header} color={color} />
      </Box>
      {state.overlay !== undefined ? (
        <OverlayView state={state} color={color} />
      ) : (
        <>
          <SectionView
            section={volumesSection(state, { offset: state.scroll.volumes, shown: layout.volumes })}
            height={layout.volumes}
            offset={state.scroll.volumes}
            color={color}
          />
          {layout.devicesPane && (
            <SectionView
              section={devicesSection(state, layout.devices)}
              height={layout.devices}
              offset={0}
              color={color}
            />
          )}
          <SectionView
            section={cleanupsSection(state, layout.cleanups)}
            height={layout.cleanups}
            offset={0}
            color={color}
          />
          <SectionView
            section={eventsSection(state, { offset: state.scroll.events, shown: layout.events })}
            height={layout.events}
            offset={state.scroll.events}
            color={color}
          />
        </>
      )}
      <Box flexDirection="column" flexShrink={0} height={layout.footer} overflow="hidden">
        <LineView line={statusLine(state)} color={color} />
        <LineView line={keysLine(state)} color={color} />
      </Box>
    </Box>
  );
}
