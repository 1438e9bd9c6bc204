import { everyPageSuite, SIZES } from './every-page.ts';

// The phone half of this suite (and the measuring test) is phone.browser.test.ts.
everyPageSuite([SIZES.desktop]);
